"""Many runs side by side: compare.html and its heatmap, JUnit XML, the run index, nightly trends and
regressions."""
