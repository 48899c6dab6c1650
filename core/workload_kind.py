"""The registry of workloads, and what a workload is beyond its clients (`WorkloadKind`).

A workload is one package below `kchaos.workloads` whose `__init__` defines `KIND`, an object implementing
WorkloadKind: its clients, the line the console says about them, its checkers, its verdict rules, its
headline numbers and the explanation of its anomalies. `KINDS` names the package: one line registers a
workload. The registry names packages rather than importing them, so the checkers and reports below the
workloads reach a workload's rules through `kind_of` when a run needs them, and a workload's `__init__` imports
no client library (its clients load in `make`).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from kchaos.core.kafka_versions import KafkaLine
    from kchaos.core.protocols import Checker, Workload

# The configuration reads the registry (a workload's options and its checks), so the protocols below take it and
# the promise untyped: `cfg` is a kchaos.core.config.TestConfig, `promise` a kchaos.core.promise.Promise.
TestConfig: TypeAlias = Any
Promise: TypeAlias = Any

DEFAULT = "queue"
# The one line per workload: its name (`--workload`, test.json's `workload.kind`) and its package.
KINDS: dict[str, str] = {
    "queue": "kchaos.workloads.queue",
    "txn": "kchaos.workloads.txn",
    "copy": "kchaos.workloads.copy",
    "share": "kchaos.workloads.share",
}


class Explainer(Protocol):
    """How a workload's anomalies are explained from Kafka's own files (docs/evidence.md)."""

    nothing: str  # what `kchaos explain` says of a run with nothing to explain

    def wanted(self, counts: Mapping[str, int]) -> bool:
        """Whether a checked run with these counts has anything to explain."""

    def explain(self, run: Path, find_libs: Callable[[dict[str, Any]], Path]) -> dict[str, Any]:
        """Explain the run's anomalies from its decoded evidence, write the explanation under run/evidence and
        return it (results.json is left as the check wrote it)."""

    def summary(self, explanation: Mapping[str, Any], run: Path) -> list[str]:
        """The few lines (rich markup) a run's end says of the explanation."""

    def lines(self, explanation: Mapping[str, Any], all_groups: bool = False) -> list[str]:
        """`kchaos explain`'s lines, plain text; none when there is nothing to explain."""


class WorkloadKind(Protocol):
    """A workload beyond its clients: everything the harness, the checkers and the reports ask of it."""

    name: str
    # Whether its headline is acknowledged writes and their loss (the queue's): loss rates, availability in
    # faults and send latency mean something for its runs.
    writes: bool
    # Whether its producers are transactional (and so idempotent, whatever --idempotence says).
    transactional: bool
    # Whether its producers are idempotent by default when acks=all (--no-idempotence turns that off, unless
    # they are transactional).
    idempotent: bool
    # The client libraries it runs on (`--client`): "python" (librdkafka), "java" (the Kafka Java client).
    clients: tuple[str, ...]
    # The oldest kafka-clients release its Java clients compile against (None: any the harness runs).
    java_clients_since: str | None
    # Its own options: a frozen dataclass whose fields' metadata make their `kchaos run` options (`flag`, `help`,
    # `metavar`); test.json's `workload.options`.
    options: type
    # Whether its history converts to Parquet and its checkers may check many runs in one Spark job.
    parquet: bool
    # Op names (a history line's "f") that only its histories have: how a history without test.json is known.
    history_ops: tuple[str, ...]
    # The counts its checker writes that a scenario's prediction may name (its observed metrics).
    counts: tuple[str, ...]
    # The anomaly kinds that compare gives a column in its rows, with what each means.
    anomalies: Mapping[str, str]
    # Its headline numbers in compare: the columns, and their values from a results.json (`facts`).
    columns: tuple[str, ...]
    explainer: Explainer | None

    def validate(self, cfg: TestConfig) -> None:
        """Raise ConfigError unless its options, and the rest of `cfg` as far as it is concerned,
        are runnable."""

    def make(self, cfg: TestConfig, java: Any = None) -> Workload:
        """The run's clients (`java`: the compiled Java client, for `--client java`)."""

    def describe(self, cfg: TestConfig) -> str:
        """The console's line about the run's clients (`workload: ...`)."""

    def features(self, line: KafkaLine) -> tuple[str, ...]:
        """The Kafka features (`NAME=LEVEL`, as --kafka-feature takes them) a cluster of Kafka `line` must finalize
        for it to run there: where the line has what it needs only in preview. None where it runs as the line
        comes."""

    def crashable(self, cfg: TestConfig) -> bool:
        """Whether the crash-client nemesis has clients to crash under `cfg`."""

    def coordinators(self, cfg: TestConfig) -> Mapping[str, tuple[str, ...]]:
        """The keys its clients' coordinators are found by under `cfg`: "txn" (transactional ids), "group"
        (consumer and share groups) and "share" (a share group's state of one partition, `group:topic:partition`),
        each kind present only when the run has such keys (the coordinator targets)."""

    def checkers(self) -> Mapping[str, Callable[..., Checker]]:
        """Its checkers by name, the first its own (the one results.json summarises), each built with `master=`."""

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        """results.json after its checkers, with what else the history shows (the queue: corrupt reads)."""

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Any:
        """The verdict of a checked run (a checkers.verdict.judge.Judgement): its verdict rules."""

    def acknowledged(self, results: Mapping[str, Any], counts: Mapping[str, int]) -> int | None:
        """The writes a checked run acknowledged; None where the results do not say."""

    def facts(self, results: Mapping[str, Any]) -> dict[str, int]:
        """The values of `columns` for one run."""

    def report(self, history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Any:
        """Its part of report.html (a reports.run.section.Section), read from the run's history."""


class UnknownWorkload(ValueError):
    """A workload name the registry does not know."""


def kind_of(name: str | None) -> WorkloadKind:
    """The workload registered as `name` (None: the default, queue). UnknownWorkload for any other name."""
    name = name or DEFAULT
    if name not in KINDS:
        raise UnknownWorkload(f"unknown workload {name!r}; known: {', '.join(sorted(KINDS))}")
    kind: WorkloadKind = importlib.import_module(KINDS[name]).KIND
    return kind


def known(name: str | None) -> WorkloadKind | None:
    """The workload registered as `name` (None: the default), or None for a name the registry does not know."""
    try:
        return kind_of(name)
    except UnknownWorkload:
        return None


def name_of(test: Mapping[str, Any] | None) -> str:
    """The workload a test.json names (`workload.kind`); the default when it names none."""
    kind = ((test or {}).get("workload") or {}).get("kind")
    return kind if isinstance(kind, str) and kind else DEFAULT


def kind_of_test(test: Mapping[str, Any] | None) -> WorkloadKind:
    """The workload a test.json names (`kind_of(name_of(test))`)."""
    return kind_of(name_of(test))


def all_kinds() -> list[WorkloadKind]:
    """Every registered workload, in registry order."""
    return [kind_of(name) for name in KINDS]
