"""Kafka's command-line tools run on a node (kafka-reassign-partitions, kafka-metadata-quorum): their answer, or a
failure told in the tool's own words."""
from __future__ import annotations

import logging
import re

from kchaos.core.protocols import FaultSkipped, NodeControl

__all__ = ["error_line", "last_line", "run_tool"]

log = logging.getLogger("kchaos.nemesis")


def error_line(out: str) -> str:
    """The tool's own words for a failure: its first line naming an exception class, else its first line."""
    lines = [line.strip() for line in out.splitlines() if line.strip() and not line.startswith(("\tat ", "  at "))]
    named = [line for line in lines if re.search(r"\w(?:Exception|Error)\b", line)]
    return (named or lines or ["(no output)"])[0][:300]


def last_line(out: str) -> str:
    """The tool's last line ("" when it printed nothing)."""
    return out.strip().splitlines()[-1] if out.strip() else ""


def run_tool(cluster: NodeControl, node: str, name: str, what: str, args: list[str]) -> str:
    """Run Kafka's tool `args[0]` (called `name`, doing `what`) with `args[1:]` on `node`; its output, or
    FaultSkipped quoting `error_line` when it fails (the whole output goes to the harness log)."""
    code, out = cluster.kafka_tool(node, args)
    if code != 0:
        log.warning("%s: %s %s failed (%d):\n%s", node, name, what, code, out)
        raise FaultSkipped(f"{name} {what} failed ({code}): {error_line(out)}")
    return out
