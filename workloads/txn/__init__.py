"""The txn workload: transactions of sends and polls, after Jepsen's Kafka test, checked for the anomalies of
transactional isolation (docs/running.md, docs/checkers.md). `KIND` is what the rest of kchaos asks of it; its
clients load only when a run makes them."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kchaos.core.config import ISOLATIONS, TestConfig, is_fraction, require
from kchaos.core.kafka_versions import KafkaLine
from kchaos.core.promise import Promise
from kchaos.core.protocols import Checker, Workload
from kchaos.workloads.txn.options import TxnOptions

# The anomalies a run's end explains from Kafka's files (`kchaos.evidence.explain.txn`).
EXPLAINED = ("torn_transaction", "G1a", "lost_write")


class TxnExplainer:
    """The txn workload's explanation: each anomalous transaction's facts and cause, from Kafka's files."""

    nothing = "no torn transactions, G1a, lost_write or aborted_read to explain"

    def wanted(self, counts: Mapping[str, int]) -> bool:
        """A run with a torn transaction, a G1a or a lost write."""
        return any(counts.get(k) for k in EXPLAINED)

    def explain(self, run: Path, find_libs: Callable[[dict[str, Any]], Path]) -> dict[str, Any]:
        """Write run/evidence/txn_explanation.json."""
        from kchaos.evidence.explain.txn import explain_txn

        return explain_txn(run, find_libs=find_libs).to_dict()

    def summary(self, explanation: Mapping[str, Any], run: Path) -> list[str]:
        """The summary line, then each anomalous transaction's cause (a few); client log lines carry [brackets]
        that are not markup."""
        from rich.markup import escape

        from kchaos.evidence.explain.txn_text import txn_console_lines

        return [escape(line) for line in txn_console_lines(explanation)]

    def lines(self, explanation: Mapping[str, Any], all_groups: bool = False) -> list[str]:
        """Each anomalous transaction's facts and cause."""
        from kchaos.evidence.explain.txn_text import txn_lines

        return txn_lines(explanation)


class Txn:
    """The txn workload's registry entry (`kchaos.core.workload_kind`)."""

    name = "txn"
    writes = False
    transactional = True
    idempotent = True
    clients = ("python", "java")
    java_clients_since = None
    options = TxnOptions
    parquet = False
    history_ops = ("txn",)
    columns = ("txn_committed", "txn_aborted", "txn_info")
    explainer = TxnExplainer()

    @property
    def counts(self) -> tuple[str, ...]:
        """The txn checker's counts."""
        from kchaos.checkers.txn.reference import COUNTS

        return COUNTS

    @property
    def anomalies(self) -> dict[str, str]:
        """Every count of the txn checker: a compare column each."""
        return dict.fromkeys(self.counts, "")

    def features(self, line: KafkaLine) -> tuple[str, ...]:
        """None: it runs on every line as the line comes."""
        return ()

    def validate(self, cfg: TestConfig) -> None:
        """Its isolation level and fractions are in range; its producers are idempotent and run one transaction at
        a time in the harness."""
        w, o = cfg.workload, cfg.workload.options
        require(o.isolation in ISOLATIONS,
                f"--txn-isolation must be one of {', '.join(ISOLATIONS)}; got {o.isolation!r}")
        require(is_fraction(o.abort_p), f"--txn-abort-p must be a fraction in [0, 1], got {o.abort_p!r}")
        require(is_fraction(o.sub_p, below_one=True), f"--txn-sub-p must be a fraction in [0, 1), got {o.sub_p!r}")
        require(cfg.producer.idempotence,
                "--workload txn needs --idempotence: a transactional producer is idempotent")
        require(w.in_flight == 1 and w.producer_processes == 0,
                "--workload txn runs one transaction at a time per producer, in the harness: "
                "it takes no --in-flight or --producer-processes")

    def make(self, cfg: TestConfig, java: Any = None) -> Workload:
        """Transactional processes on librdkafka, or on Kafka's Java client (`java`)."""
        from kchaos.workloads.txn.workload import TxnWorkload

        return TxnWorkload(cfg, java=java)

    def describe(self, cfg: TestConfig) -> str:
        """`workload: 4 producers at 100/s, transactions (abort 0.1, polls read_committed)`."""
        w = cfg.workload
        return (f"workload: {w.producers} producer{'s' * (w.producers != 1)} at "
                + (f"{w.rate:g}/s" if w.rate != "max" else "full load")
                + f", transactions (abort {w.options.abort_p:g}, polls {w.options.isolation}"
                + (f", Java client kafka-clients {w.client_version})" if w.client == "java" else ")"))

    def crashable(self, cfg: TestConfig) -> bool:
        """Its processes can always be crashed."""
        return True

    def coordinators(self, cfg: TestConfig) -> dict[str, tuple[str, ...]]:
        """Each process's transactional id, and the groups its transactions commit offsets to."""
        from kchaos.workloads.txn.client import txn_id
        from kchaos.workloads.txn.consumer import txn_group

        processes = range(cfg.workload.producers)
        return {"txn": tuple(txn_id(cfg.seed, p) for p in processes),
                "group": tuple(sorted({txn_group(cfg, p) for p in processes}))}

    def checkers(self) -> dict[str, Callable[..., Checker]]:
        """The txn checker on Spark; its reference (`kchaos.checkers.txn.reference`) stays the definition it is tested
        against."""
        from kchaos.checkers.txn.check import TXN, TxnSparkChecker

        return {TXN: TxnSparkChecker}

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        """Nothing to add."""
        return result

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Any:
        """The verdict of a txn run by its rules (`judge_txn`), with test.json's isolation where the checker's
        result is not at hand."""
        from kchaos.checkers.txn.reference import isolation_of
        from kchaos.workloads.txn.verdict import judge_txn

        return judge_txn(results, counts, isolation_of(test), promise)

    def acknowledged(self, results: Mapping[str, Any], counts: Mapping[str, int]) -> int | None:
        """Sends in committed transactions."""
        from kchaos.workloads.txn.verdict import acknowledged

        return acknowledged(results)

    def facts(self, results: Mapping[str, Any]) -> dict[str, int]:
        """Committed, aborted and indefinite transactions."""
        stats = results.get("stats") or {}
        return {"txn_committed": int(stats.get("txn_ok") or 0), "txn_aborted": int(stats.get("txn_fail") or 0),
                "txn_info": int(stats.get("txn_info") or 0)}

    def report(self, history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Any:
        """A txn run's part of report.html, read from its history: transactions per second and latency, the
        explanation from Kafka's files, example cycles."""
        from kchaos.reports.run.section import txn_section

        return txn_section(history, test, results)


KIND = Txn()
