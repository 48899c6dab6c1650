"""kchaos harness: building and running tests, suites and scenarios, and the command line."""
