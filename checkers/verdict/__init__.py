"""Verdicts: one word per run from the checkers' results, what a configuration promises, and what a run
observed."""
