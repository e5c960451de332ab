"""The ``deltafit`` command.

``deltafit demo`` (in ``_demo``) follows a model in service while its data changes: a deletion
request, corrected labels, new data and a what-if (certified bounds, ``deltafit.sensitivity``),
each update timed warm against a refit on the same data and checked against it.
"""

from __future__ import annotations

import argparse
import sys

from ._demo import add_demo_command, demo

__all__ = ["main", "demo"]


def build_parser():
    p = argparse.ArgumentParser(
        prog="deltafit",
        description="Exact and certified updates of trained models when the training data changes.",
    )
    from ._version import __version__

    p.add_argument("--version", action="version", version=f"deltafit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    add_demo_command(sub)
    from ._cli_cv import add_cv_commands
    from ._cli_experiments import add_experiment_commands
    from ._cli_treecv import add_treecv_command

    add_cv_commands(sub)
    add_treecv_command(sub)
    add_experiment_commands(sub)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        try:
            dev = demo(args)
        except ValueError as exc:
            print(f"deltafit demo: error: {exc}", file=sys.stderr)
            return 2
        tol = 1e-8 if args.loss == "squared" else 1e-6
        return 0 if dev < tol else 1
    if args.command in ("loo", "search"):
        from ._cli_cv import run_cv_command

        try:
            return run_cv_command(args)
        except ValueError as exc:
            print(f"deltafit {args.command}: error: {exc}", file=sys.stderr)
            return 2
    if args.command == "treecv":
        from ._cli_treecv import run_treecv_command

        try:
            return run_treecv_command(args)
        except ValueError as exc:
            print(f"deltafit treecv: error: {exc}", file=sys.stderr)
            return 2
    if args.command in ("stream", "active"):
        from . import _cli_experiments

        run = getattr(_cli_experiments, f"run_{args.command}_command")
        try:
            return run(args)
        except ValueError as exc:
            print(f"deltafit {args.command}: error: {exc}", file=sys.stderr)
            return 2
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
