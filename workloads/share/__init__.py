"""The share workload: producers send unique integers, and the members of one share group (KIP-932, Kafka's
queues) are delivered them under acquisition locks and acknowledge each (docs/running.md). `KIND` is what the rest
of kchaos asks of it; its clients load only when a run makes them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kchaos.core.config import SHARE_CLIENTS_DEFAULT, SHARE_FEATURE, TestConfig, is_int, require, share_groups_on
from kchaos.core.kafka_versions import KafkaLine, UnsupportedVersion, line_of
from kchaos.core.promise import Promise
from kchaos.core.protocols import Checker, Workload
from kchaos.workloads.share.options import (
    BROKERS_DELIVERY_LIMIT,
    COMMITS,
    DEFAULT_MIX,
    MAX_DELIVERY_LIMIT,
    MAX_LOCK_MS,
    MIN_DELIVERY_LIMIT,
    MIN_LOCK_MS,
    ShareOptions,
    parse_mix,
)


class ShareExplainer:
    """The share workload's explanation: each example record's deliveries, acknowledgements and faults beside
    what the share coordinators wrote of it (`kchaos.evidence.explain.share`)."""

    nothing = "no share anomalies to explain"

    def wanted(self, counts: Mapping[str, int]) -> bool:
        """A run with any share anomaly."""
        from kchaos.checkers.share.check import SHARE_KINDS

        return any(counts.get(k) for k in SHARE_KINDS)

    def explain(self, run: Path, find_libs: Callable[[dict[str, Any]], Path]) -> dict[str, Any]:
        """Write run/evidence/share_explanation.json."""
        from kchaos.evidence.explain.share import explain_share

        return explain_share(run, find_libs=find_libs)

    def summary(self, explanation: Mapping[str, Any], run: Path) -> list[str]:
        """Each cause with its first records' stories (rich markup escaped)."""
        from rich.markup import escape

        from kchaos.evidence.explain.share import share_lines

        return [escape(line) for line in share_lines(dict(explanation))]

    def lines(self, explanation: Mapping[str, Any], all_groups: bool = False) -> list[str]:
        """Each cause with its records' stories (all of them with `all_groups`)."""
        from kchaos.evidence.explain.share import share_lines

        return share_lines(dict(explanation), all_groups)


class Share:
    """The share workload's registry entry (`kchaos.core.workload_kind`)."""

    name = "share"
    writes = True
    transactional = False
    idempotent = True
    clients = ("java",)  # librdkafka has no share consumer
    java_clients_since = SHARE_CLIENTS_DEFAULT  # KafkaShareConsumer and its Admin calls production-ready
    options = ShareOptions
    parquet = False
    history_ops = ("share-poll", "share-ack")
    counts: tuple[str, ...] = ("redelivered", "accepted_twice", "member_duplicates")
    columns = ("share_acked", "share_delivered", "share_redelivered", "share_accepted_twice")
    explainer = ShareExplainer()

    @property
    def anomalies(self) -> dict[str, str]:
        """The share checker's kinds, with what each means."""
        from kchaos.checkers.share.check import SHARE_KINDS

        return SHARE_KINDS

    def features(self, line: KafkaLine) -> tuple[str, ...]:
        """Share groups' preview feature where the line has them in preview (4.1)."""
        return (f"{SHARE_FEATURE}=1",) if line.share_preview else ()

    def validate(self, cfg: TestConfig) -> None:
        """Its acknowledgement mix, lock and delivery limit are in range; its Kafka line has share groups; its
        members are consumers on Kafka's Java client."""
        w, o = cfg.workload, cfg.workload.options
        try:
            parse_mix(o.ack_mix)
        except ValueError as e:
            require(False, str(e))
        require(o.commit in COMMITS, f"--share-commit must be one of {', '.join(COMMITS)}, got {o.commit!r}")
        require(o.commit != "implicit" or o.ack_mix == DEFAULT_MIX,
                "--share-commit implicit accepts every record a poll returns: it takes no --share-ack-mix")
        require(is_int(o.lock_ms) and MIN_LOCK_MS <= o.lock_ms <= MAX_LOCK_MS,
                f"--share-lock-ms must be {MIN_LOCK_MS}..{MAX_LOCK_MS}, got {o.lock_ms!r}")
        require(is_int(o.delivery_limit) and MIN_DELIVERY_LIMIT <= o.delivery_limit <= MAX_DELIVERY_LIMIT,
                f"--share-delivery-limit must be {MIN_DELIVERY_LIMIT}..{MAX_DELIVERY_LIMIT}, got {o.delivery_limit!r}")
        try:
            line = line_of(cfg.cluster.kafka_version)
        except UnsupportedVersion:
            line = None
        require(line is not None and (line.share_groups or line.share_preview),
                f"--workload share needs a Kafka line with share groups (4.2 or later, or 4.1 with the preview "
                f"feature), not --kafka-version {cfg.cluster.kafka_version}")
        assert line is not None
        require(share_groups_on(cfg.cluster), f"--workload share on Kafka {line.line} needs share groups' preview "
                                              f"feature on: --kafka-feature {SHARE_FEATURE}=1")
        require(line.share_group_delivery_limit or o.delivery_limit == BROKERS_DELIVERY_LIMIT,
                f"--share-delivery-limit: Kafka {line.line} has no group config share.delivery.count.limit (4.3 "
                f"added it), so its limit is the brokers' default, {BROKERS_DELIVERY_LIMIT}; got {o.delivery_limit}")
        require(w.in_flight == 1 and w.producer_processes == 0 and w.rate != "max",
                "--workload share runs its producers in the harness: it takes no --in-flight, --producer-processes "
                "or --rate max")
        require(w.client == "java", "--workload share runs its members on the Kafka Java client: --client java")
        require(w.consumers >= 1, "--workload share needs --consumers >= 1: they are the share group's members")

    def make(self, cfg: TestConfig, java: Any = None) -> Workload:
        """Producers on librdkafka, members on Kafka's Java client (`java`)."""
        from kchaos.workloads.share.workload import ShareWorkload

        return ShareWorkload(cfg, java=java)

    def describe(self, cfg: TestConfig) -> str:
        """`workload: 4 producers at 100/s; 2 share members (Java), mix accept=90,..., commitSync, lock 15000 ms,
        delivery limit 5`."""
        w, o = cfg.workload, cfg.workload.options
        acks = "implicit acknowledgement" if o.commit == "implicit" else \
            f"mix {o.ack_mix}, {'commitAsync' if o.commit == 'async' else 'commitSync'}"
        return (f"workload: {w.producers} producer{'s' * (w.producers != 1)} at {w.rate:g}/s; {w.consumers} share "
                f"member{'s' * (w.consumers != 1)} (Java), {acks}, lock {o.lock_ms} ms, delivery limit "
                f"{o.delivery_limit}")

    def crashable(self, cfg: TestConfig) -> bool:
        """Its members can always be crashed and replaced."""
        return True

    def coordinators(self, cfg: TestConfig) -> dict[str, tuple[str, ...]]:
        """The share group (its group coordinator), and its state for each partition of the topic (the share
        coordinator holding it, found by `group:topic:partition`)."""
        from kchaos.workloads.share.workload import share_group

        group = share_group(cfg.seed)
        return {"group": (group,), "share": tuple(f"{group}:{cfg.topic.name}:{p}" for p in range(cfg.topic.partitions))}

    def checkers(self) -> dict[str, Callable[..., Checker]]:
        """The share checker."""
        from kchaos.checkers.share.check import SHARE, ShareChecker

        return {SHARE: ShareChecker}

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        """Nothing to add."""
        return result

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Any:
        """The verdict of a share run (`judge_share`)."""
        from kchaos.workloads.share.verdict import judge_share

        return judge_share(results, counts, promise)

    def acknowledged(self, results: Mapping[str, Any], counts: Mapping[str, int]) -> int | None:
        """The acknowledged sends."""
        from kchaos.workloads.share.verdict import acknowledged

        return acknowledged(counts)

    def facts(self, results: Mapping[str, Any]) -> dict[str, int]:
        """Acknowledged sends, records delivered, redeliveries, records accepted twice."""
        counts = results.get("counts") or {}
        return {"share_acked": int(counts.get("acked") or 0), "share_delivered": int(counts.get("delivered") or 0),
                "share_redelivered": int(counts.get("redelivered") or 0),
                "share_accepted_twice": int(counts.get("accepted_twice") or 0)}

    def report(self, history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Any:
        """A share run's part of report.html: deliveries, acknowledgements and redeliveries, and the send plots."""
        from kchaos.reports.run.section import share_section

        return share_section(history, test, results)


KIND = Share()
