"""kchaos core: the vocabulary every layer shares (configuration, history, store, protocols, faults, the run's
files, the hosts file, exit codes). It imports no other kchaos package."""

__version__ = "0.1.0"
