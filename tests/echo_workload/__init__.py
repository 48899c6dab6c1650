"""A workload defined only in the tests, to show that a new workload is one package plus one registry line
(`KINDS["echo"] = "echo_workload"`): its history, checker, verdict rules, headline numbers and report section all
live here, and check, the verdict, report.html and compare reach them through the registry.

Its history: each process sends integers (`{"f": "echo", "type": "invoke"|"ok", "value": n}`), and one final read
lists what came back (`{"f": "echo_read", "type": "ok", "value": [n, ...]}`). An acknowledged echo missing from the
read is `echo_lost`, which fails the run wherever the configuration promises no loss."""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kchaos.checkers.parquet import CheckInputError
from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, Judgement, undecided_checks
from kchaos.core.config import TestConfig, require
from kchaos.core.promise import Promise
from kchaos.reports.html import ENV
from kchaos.reports.run.section import Section

LOST = "echo_lost"
TEMPLATE = ENV.from_string("""{% from "macros.html.j2" import muted %}
{% macro headline() %}{{ d.section.data.acked }} echoes acknowledged, {{ d.section.data.read }} read back.{% endmacro %}
{% macro body() %}<h2>Echoes</h2>{{ muted("No plots: the echo workload draws none.") }}{% endmacro %}
{% macro intro() %}<p>Echoes acknowledged and read back, by value.</p>{% endmacro %}
{% macro after_anomalies() %}{% endmacro %}
""")


def _read(history: Path) -> tuple[set[int], set[int]]:
    acked: set[int] = set()
    read: set[int] = set()
    for n, line in enumerate(history.read_text(encoding="utf-8").splitlines(), 1):
        try:
            op = json.loads(line)
        except ValueError:
            raise CheckInputError(f"{history}:{n}: not JSON") from None
        if op.get("f") == "echo" and op.get("type") == "ok":
            acked.add(op["value"])
        elif op.get("f") == "echo_read":
            read.update(op["value"])
    return acked, read


class EchoChecker:
    """Every acknowledged echo must be in the final read."""

    def __init__(self, master: str = "local[*]"):
        self.master = master

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        acked, read = _read(history_path)
        lost = sorted(acked - read)
        return {"valid": not lost, "counts": {"acked": len(acked), LOST: len(lost)}, "examples": {LOST: lost[:10]}}

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        return [self.check(test, path) for test, path in runs]


@dataclass(frozen=True)
class EchoOptions:
    """How many echoes each process sends."""

    echoes: int = field(default=3, metadata={"flag": "--echoes", "metavar": "N", "help": "echoes per process"})


class Echo:
    """The echo workload's registry entry."""

    name = "echo"
    writes = False
    transactional = False
    idempotent = False
    clients = ("python",)
    options = EchoOptions
    parquet = False
    history_ops = ("echo",)
    counts: tuple[str, ...] = (LOST,)
    anomalies = {LOST: "an acknowledged echo was not read back"}
    columns = ("echo_acked",)
    explainer = None

    def validate(self, cfg: TestConfig) -> None:
        require(cfg.workload.options.echoes >= 1, "--echoes must be >= 1")

    def make(self, cfg: TestConfig, java: Any = None) -> Any:
        raise NotImplementedError("the echo workload has no clients: its runs are written by the tests")

    def describe(self, cfg: TestConfig) -> str:
        return f"workload: {cfg.workload.producers} echo processes"

    def crashable(self, cfg: TestConfig) -> bool:
        return False

    def coordinators(self, cfg: TestConfig) -> dict[str, tuple[str, ...]]:
        return {}

    def checkers(self) -> dict[str, Callable[..., Any]]:
        return {"echo": EchoChecker}

    def amend(self, history: Path, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def judge(self, results: Mapping[str, Any], counts: Mapping[str, int], promise: Promise,
              test: Mapping[str, Any]) -> Judgement:
        undecided = undecided_checks(results, counts, self.acknowledged(results, counts))
        lost = counts.get(LOST, 0)
        failed = {LOST: lost} if lost and promise.no_loss else {}
        allowed = {LOST: lost} if lost and not promise.no_loss else {}
        why = {"failed": dict.fromkeys(failed, self.anomalies[LOST]),
               "allowed": dict.fromkeys(allowed, promise.no_durability or "")}
        return Judgement(FAIL if failed else UNKNOWN if undecided else PASS, failed, allowed, why, tuple(undecided))

    def acknowledged(self, results: Mapping[str, Any], counts: Mapping[str, int]) -> int | None:
        return counts.get("acked")

    def facts(self, results: Mapping[str, Any]) -> dict[str, int]:
        return {"echo_acked": int((results.get("counts") or {}).get("acked") or 0)}

    def report(self, history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Section:
        acked, read = _read(history)
        return Section(TEMPLATE, "echo", SimpleNamespace(acked=len(acked), read=len(acked & read)), lambda *_: {})


KIND = Echo()
