"""Everything that runs on a Dask cluster: input handling, the passes over the rows and the Dask states."""
