"""The `kchaos` command line's exit codes beyond the verdict's 0 pass, 1 fail and 2 unknown (checkers.exit_code;
docs/verdicts.md), and what every code means (`kchaos --help` lists them)."""
from __future__ import annotations

EXIT_BAD_INPUT = 3  # options, paths, histories, suite and scenario files
EXIT_ENV = 4  # no Docker Engine, no Kafka jars, image build, a host unreachable or refusing the login
EXIT_CLUSTER = 5  # the cluster failed
EXIT_REGRESSION = 6  # kchaos suite --fail-on-regression: a cell regressed since the suite's previous night
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM

MEANINGS = (
    (0, "pass: no anomaly the configuration promises against (anomalies it allows are reported, docs/verdicts.md); "
        "suite, merge: every cell passed; scenario: every prediction matched; repro: every attempt reproduced; "
        "shrink: a smaller schedule was found"),
    (1, "fail: an anomaly the configuration promises against (a write lost inside Kafka's guarantee, a duplicate "
        "with idempotence on, ...); suite, merge: a cell failed or errored; scenario: a prediction missed; "
        "repro, shrink: the opposite of 0"),
    (2, "unknown: nothing failed, but the checker could not decide (e.g. the final read did not complete); "
        "suite, merge: no cell failed or errored, and one is unknown"),
    (EXIT_BAD_INPUT, "bad input: options, paths, histories, suite, scenario and hosts files; nothing was created"),
    (EXIT_ENV, "environment: no Docker Engine, no Kafka jars, the image build failed, a host unreachable, refusing "
               "the login or its host key, or lacking what kchaos needs"),
    (EXIT_CLUSTER, "the cluster failed"),
    (EXIT_REGRESSION, "suite or merge with --fail-on-regression: a regression since the suite's previous night (a "
                      "cell that passed and fails now, or an anomaly kind new to a cell; docs/suites.md); it outranks "
                      "1 and 2"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); the run directory keeps what was recorded"),
)
