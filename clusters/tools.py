"""Kafka's command-line tools run on a node (kafka-reassign-partitions, kafka-metadata-quorum): their answer, or a
failure told in the tool's own words."""
from __future__ import annotations

import logging
import re

from kchaos.core.protocols import FaultSkipped, NodeControl

__all__ = ["error_line", "last_line", "run_tool"]

log = logging.getLogger("kchaos.nemesis")
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] (?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")


def error_line(out: str) -> str:
    """The tool's own words for a failure: its first line naming an exception class, else its first line; its
    clients' log lines only when it said nothing else."""
    lines = [line.strip() for line in out.splitlines() if line.strip() and not line.startswith(("\tat ", "  at "))]
    said = [line for line in lines if not _LOG_LINE.match(line)] or lines
    named = [line for line in said if re.search(r"\w(?:Exception|Error)\b", line)]
    return (named or said or ["(no output)"])[0][:300]


def last_line(out: str) -> str:
    """The tool's last line that is not one of its clients' log lines (`[date time] WARN ...`, which its admin
    client writes beside its answer when a broker does not answer at once); "" when it printed nothing else."""
    said = [line for line in out.strip().splitlines() if not _LOG_LINE.match(line)]
    return said[-1] if said else ""


def run_tool(cluster: NodeControl, node: str, name: str, what: str, args: list[str]) -> str:
    """Run Kafka's tool `args[0]` (called `name`, doing `what`) with `args[1:]` on `node`; its output, or
    FaultSkipped quoting `error_line` when it fails (the whole output goes to the harness log)."""
    code, out = cluster.kafka_tool(node, args)
    if code != 0:
        log.warning("%s: %s %s failed (%d):\n%s", node, name, what, code, out)
        raise FaultSkipped(f"{name} {what} failed ({code}): {error_line(out)}")
    return out
