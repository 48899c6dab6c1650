"""The copy workload: copiers read an input topic and write each value to an output topic inside transactions
that also commit their input offsets, Kafka's own exactly-once test (docs/running.md). `KIND` is what the rest
of kchaos asks of it; its clients load only when a run makes them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kchaos.core.config import ISOLATIONS, TestConfig, is_int, require
from kchaos.core.kafka_versions import KafkaLine
from kchaos.core.promise import Promise
from kchaos.core.protocols import Checker, Workload
from kchaos.workloads.copy.options import MAX_COPY_RECORDS, MAX_TXN_SIZE, CopyOptions


class Copy:
    """The copy workload's registry entry (`kchaos.core.workload_kind`)."""

    name = "copy"
    writes = False
    transactional = True
    idempotent = True
    clients = ("python", "java")
    java_clients_since = None
    options = CopyOptions
    parquet = False
    history_ops = ("copy",)
    counts: tuple[str, ...] = ()
    columns = ("copy_input", "copy_copied")
    explainer = None

    @property
    def anomalies(self) -> dict[str, str]:
        """The copy checker's kinds, with what each means."""
        from kchaos.checkers.copy.check import COPY_KINDS

        return COPY_KINDS

    def features(self, line: KafkaLine) -> tuple[str, ...]:
        """None: it runs on every line as the line comes."""
        return ()

    def validate(self, cfg: TestConfig) -> None:
        """Its sizes and isolation level are in range; its copiers are transactional consumers in the harness."""
        w, o = cfg.workload, cfg.workload.options
        require(o.isolation in ISOLATIONS,
                f"--txn-isolation must be one of {', '.join(ISOLATIONS)}; got {o.isolation!r}")
        require(is_int(o.txn_size) and 1 <= o.txn_size <= MAX_TXN_SIZE,
                f"--txn-size must be 1..{MAX_TXN_SIZE} records, got {o.txn_size!r}")
        require(is_int(o.records) and 0 <= o.records <= MAX_COPY_RECORDS,
                f"--copy-records must be 0..{MAX_COPY_RECORDS} (0: --rate x --time-limit), got {o.records!r}")
        require(cfg.producer.idempotence,
                "--workload copy needs --idempotence: its copiers' producers are transactional")
        require(w.consumers >= 1, "--workload copy needs --consumers >= 1: the copiers are its consumers")
        require(o.records > 0 or w.rate != "max", "--workload copy with --rate max needs --copy-records N")
        require(w.in_flight == 1 and w.producer_processes == 0,
                "--workload copy runs its copiers in the harness: it takes no --in-flight or --producer-processes")

    def make(self, cfg: TestConfig, java: Any = None) -> Workload:
        """Copiers on librdkafka, or on Kafka's Java client (`java`)."""
        from kchaos.workloads.copy.workload import CopyWorkload

        return CopyWorkload(cfg, java=java)

    def describe(self, cfg: TestConfig) -> str:
        """`workload: 2 copiers at 100 records/s, 10 per transaction, input 3 partitions, final read ...`."""
        w = cfg.workload
        return (f"workload: {w.consumers} copier{'s' * (w.consumers != 1)} at "
                + (f"{w.rate:g} records/s" if w.rate != "max" else "full speed")
                + f", {w.options.txn_size} per transaction, input "
                + ("one partition, its order kept" if w.options.order else f"{cfg.topic.partitions} partitions")
                + f", final read {w.options.isolation}")

    def crashable(self, cfg: TestConfig) -> bool:
        """Its copiers can always be crashed."""
        return True

    def coordinators(self, cfg: TestConfig) -> dict[str, tuple[str, ...]]:
        """Each copier slot's transactional id, and the copiers' group."""
        from kchaos.workloads.copy.copier import copy_group, copy_txn_id

        return {"txn": tuple(copy_txn_id(cfg.seed, slot) for slot in range(cfg.workload.consumers)),
                "group": (copy_group(cfg.seed),)}

    def checkers(self) -> dict[str, Callable[..., Checker]]:
        """The copy checker: the output read at the end against the input."""
        from kchaos.checkers.copy.check import COPY, CopyChecker

        return {COPY: CopyChecker}

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        """Nothing to add."""
        return result

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Any:
        """The verdict of a copy run from its results.json, its `counts` and what its configuration promises
        (exactly-once where it promises no loss)."""
        from kchaos.workloads.copy.verdict import judge_copy

        return judge_copy(results, counts, promise)

    def acknowledged(self, results: Mapping[str, Any], counts: Mapping[str, int]) -> int | None:
        """The input's values."""
        from kchaos.workloads.copy.verdict import acknowledged

        return acknowledged(counts)

    def facts(self, results: Mapping[str, Any]) -> dict[str, int]:
        """The input's values and how many reached the output."""
        counts = results.get("counts") or {}
        return {"copy_input": int(counts.get("input") or 0),
                "copy_copied": int(counts.get("input") or 0) - int(counts.get("copy_missing") or 0)}

    def report(self, history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Any:
        """A copy run's part of report.html, read from its history: the input against the output, copy transactions
        per second and latency, example anomalies."""
        from kchaos.reports.run.section import copy_section

        return copy_section(history, test, results)


KIND = Copy()
