"""Scenarios: an exact fault schedule and a prediction, run and rated; repro and shrink of a run."""
