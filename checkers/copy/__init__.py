"""The copy workload's checker: every input record copied to the output exactly once, in order."""
