"""kchaos harness: runner, CLI, history recorder and results store."""

__version__ = "0.1.0"
