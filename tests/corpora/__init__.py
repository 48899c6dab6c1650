"""Labelled histories for the checkers' tests and benches: each anomaly planted, and the answer known."""
