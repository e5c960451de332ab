"""What-if regions: the certified sets (ball, exact, curvature) that bound a retrained model."""
