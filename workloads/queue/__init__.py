"""The queue workload: producers send unique integers to the test topic, consumers read them back, and every
acknowledged write must be read at the end (docs/running.md). `KIND` is what the rest of kchaos asks of it;
its clients load only when a run makes them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kchaos.core.config import TestConfig, require
from kchaos.core.kafka_versions import KafkaLine
from kchaos.core.promise import Promise
from kchaos.core.protocols import Checker, Workload
from kchaos.workloads.queue.options import GROUP_COMMITS, QueueOptions

# The consumer group's anomaly kinds (--consumer-mode subscribe): a column each in compare.
GROUP_KINDS = {"committed_unconsumed": "the group committed offsets past records no member processed",
               "double_consumed": "a record was processed by two members"}


class LostWrites:
    """The queue's explanation: each lost write placed in Kafka's own files, grouped by cause."""

    nothing = "no lost writes to explain"

    def wanted(self, counts: Mapping[str, int]) -> bool:
        """A run that lost writes."""
        return bool(counts.get("lost"))

    def explain(self, run: Path, find_libs: Callable[[dict[str, Any]], Path]) -> dict[str, Any]:
        """Write run/evidence/explanation.json."""
        from kchaos.evidence.explain.lost import explain

        return explain(run, find_libs=find_libs).to_dict()

    def summary(self, explanation: Mapping[str, Any], run: Path) -> list[str]:
        """The largest groups of lost writes by cause."""
        from kchaos.evidence.explain.text import console_lines

        return console_lines(explanation, run)

    def lines(self, explanation: Mapping[str, Any], all_groups: bool = False) -> list[str]:
        """One sentence per group (with `all_groups`, per lost range)."""
        from kchaos.evidence.explain.text import explain_lines

        return explain_lines(explanation, all_groups) if explanation.get("ranges") else []


class Queue:
    """The queue workload's registry entry (`kchaos.core.workload_kind`)."""

    name = "queue"
    writes = True
    transactional = False
    idempotent = False
    clients = ("python", "java")
    java_clients_since = None
    options = QueueOptions
    parquet = True
    history_ops: tuple[str, ...] = ()
    anomalies = GROUP_KINDS
    columns: tuple[str, ...] = ()
    explainer = LostWrites()

    @property
    def counts(self) -> tuple[str, ...]:
        """The queue checker's counts."""
        from kchaos.checkers.queue.reference import COUNTS

        return COUNTS

    def features(self, line: KafkaLine) -> tuple[str, ...]:
        """None: it runs on every line as the line comes."""
        return ()

    def validate(self, cfg: TestConfig) -> None:
        """Its commit mode is known; subscribed consumers need at least one consumer."""
        w, o = cfg.workload, cfg.workload.options
        require(o.group_commit in GROUP_COMMITS,
                f"--group-commit must be one of {', '.join(GROUP_COMMITS)}; got {o.group_commit!r}")
        require(w.consumer_mode != "subscribe" or w.consumers >= 1, "--consumer-mode subscribe needs --consumers >= 1")
        require(w.client != "java" or not w.producer_processes,
                "--producer-processes runs librdkafka producers in worker processes; with --client java every "
                "producer is a thread of one JVM")

    def make(self, cfg: TestConfig, java: Any = None) -> Workload:
        """Producers and consumers in the harness (or producer processes, `--producer-processes`; or, with
        `java`, the producers and the assigned consumers in one JVM of the Java client)."""
        from kchaos.workloads.queue.workload import QueueWorkload

        return QueueWorkload(cfg, java=java)

    def describe(self, cfg: TestConfig) -> str:
        """`workload: 4 producers at 100/s, 2 consumers in one group (sync commits, classic protocol)`."""
        w = cfg.workload
        return (f"workload: {w.producers} producer{'s' * (w.producers != 1)} at "
                + (f"{w.rate:g}/s" if w.rate != "max" else "full load")
                + (f", {w.in_flight} sends in flight each" if w.in_flight > 1 else "")
                + (f", in {w.producer_processes} processes" if w.producer_processes else "")
                + (f" on the Java client (kafka-clients {w.client_version})" if w.client == "java" else "")
                + f", {w.consumers} consumer{'s' * (w.consumers != 1)}"
                + (f" in one group ({w.options.group_commit} commits, {w.group_protocol} protocol)"
                   if w.consumer_mode == "subscribe" else ""))

    def crashable(self, cfg: TestConfig) -> bool:
        """Group members can be crashed; assigned consumers cannot."""
        return cfg.workload.consumer_mode == "subscribe"

    def coordinators(self, cfg: TestConfig) -> dict[str, tuple[str, ...]]:
        """The consumer group of subscribed consumers; assigned consumers have none."""
        from kchaos.workloads.rebalance import group_id

        return {"group": (group_id(cfg.seed),)} if cfg.workload.consumer_mode == "subscribe" else {}

    def checkers(self) -> dict[str, Callable[..., Checker]]:
        """The queue checker (Spark, on the history's Parquet)."""
        from kchaos.checkers.queue.check import QueueChecker

        return {"queue": QueueChecker}

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        """Add the reads of records the corrupt nemesis flipped on disk (`corrupt_read`), and the sends that did
        not succeed counted by Kafka's error name (`send_errors`)."""
        from kchaos.checkers.corrupt_reads import KIND, corrupt_reads
        from kchaos.checkers.send_errors import KEY, send_errors

        if "counts" in result and (flipped := corrupt_reads(history)) is not None:
            result = {**result, "counts": {**result["counts"], KIND: flipped["count"]},
                      "examples": {**(result.get("examples") or {}), KIND: flipped["examples"]}}
        if (errors := send_errors(history.with_suffix(".parquet"))) is not None:
            result = {**result, KEY: errors}
        return result

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Any:
        """The verdict of a queue run from its results.json, its `counts` and what its configuration promises."""
        from kchaos.workloads.queue.verdict import judge_queue

        return judge_queue(results, counts, promise, test)

    def acknowledged(self, results: Mapping[str, Any], counts: Mapping[str, int]) -> int | None:
        """Acknowledged sends (`counts.acked`)."""
        from kchaos.workloads.queue.verdict import acknowledged

        return acknowledged(counts)

    def facts(self, results: Mapping[str, Any]) -> dict[str, int]:
        """None beyond compare's own columns for writes."""
        return {}

    def report(self, history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Any:
        """The queue's part of report.html: its sends from the history's Parquet form, and a subscribe-mode run's
        rebalances."""
        from kchaos.reports.run.section import queue_section

        return queue_section(history, test, results)


KIND = Queue()
