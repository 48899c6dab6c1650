"""The `kchaos` command line: its parser, its commands, and what it prints."""
