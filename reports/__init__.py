"""Reports: per-run report.html, suite comparisons, JUnit XML and the local results browser."""
