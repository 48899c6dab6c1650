"""Suites: a matrix of `kchaos run` options in a YAML file, run cell by cell, as many times as asked."""
