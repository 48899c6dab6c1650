"""The copy workload: copiers read an input topic and write each value to an output topic inside transactions
that also commit their input offsets, Kafka's own exactly-once test (docs/running.md). `KIND` is what the rest
of kchaos asks of it; its clients load only when a run makes them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kchaos.checkers.copy.check import COPY, COPY_KINDS
from kchaos.core.config import TestConfig
from kchaos.core.promise import Promise
from kchaos.core.protocols import Checker, Workload


class Copy:
    """The copy workload's registry entry (core/workload_kind.py)."""

    name = COPY
    writes = False
    idempotent = True
    parquet = False
    history_ops = ("copy",)
    counts: tuple[str, ...] = ()
    anomalies = COPY_KINDS
    columns = ("copy_input", "copy_copied")
    explainer = None

    def make(self, cfg: TestConfig, java: Any = None) -> Workload:
        """Copiers on librdkafka, or on Kafka's Java client (`java`)."""
        from kchaos.workloads.copy.workload import CopyWorkload

        return CopyWorkload(cfg, java=java)

    def describe(self, cfg: TestConfig) -> str:
        """`workload: 2 copiers at 100 records/s, 10 per transaction, input 3 partitions, final read ...`."""
        w = cfg.workload
        return (f"workload: {w.consumers} copier{'s' * (w.consumers != 1)} at "
                + (f"{w.rate:g} records/s" if w.rate != "max" else "full speed")
                + f", {w.txn_size} per transaction, input "
                + ("one partition, its order kept" if w.copy_order else f"{cfg.topic.partitions} partitions")
                + f", final read {w.txn_isolation}")

    def crashable(self, cfg: TestConfig) -> bool:
        """Its copiers can always be crashed."""
        return True

    def checkers(self) -> dict[str, Callable[..., Checker]]:
        """The copy checker: the output read at the end against the input."""
        from kchaos.checkers.copy.check import CopyChecker

        return {COPY: CopyChecker}

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        """Nothing to add."""
        return result

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Any:
        """workloads/copy/verdict.py."""
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
        """reports/run/section.py."""
        from kchaos.reports.run.section import copy_section

        return copy_section(history, test, results)


KIND = Copy()
