"""The `kchaos` command line's exit codes beyond 0 valid, 1 invalid and 2 unknown (checkers.exit_code)."""
from __future__ import annotations

EXIT_BAD_INPUT = 3  # options, paths, histories, suite and scenario files
EXIT_ENV = 4  # no Docker Engine, no Kafka jars, image build, a host unreachable or refusing the login
EXIT_CLUSTER = 5  # the cluster failed
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM
