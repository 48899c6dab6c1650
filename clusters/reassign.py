"""Partition reassignment as an operator runs it: Kafka's own kafka-reassign-partitions (ReassignPartitionsCommand,
the same class in every line kchaos runs), run with the cluster's jars on a broker that runs.

A plan is Kafka's reassignment JSON (`{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}`). The
tool writes nothing but its answer; what it did is read back with `--verify` and `--list`.
"""
from __future__ import annotations

import json
import re
import shlex
import uuid
from dataclasses import dataclass
from typing import Any

from kchaos.clusters.tools import last_line, run_tool
from kchaos.core.protocols import FaultSkipped, NodeControl

__all__ = ["TOOL", "Moving", "cancel", "execute", "moving", "plan", "verify"]

TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
# `--list`: "kchaos-0: replicas: 4,2,3,1. adding: 4. removing: 1." (either part left out when empty)
_LISTED = re.compile(r"^(?P<topic>\S+)-(?P<p>\d+): replicas: (?P<r>[\d,]*)\.(?: adding: (?P<a>[\d,]*)\.)?"
                     r"(?: removing: (?P<x>[\d,]*)\.)?\s*$", re.M)
# `--verify`: "Reassignment of partition kchaos-0 is completed." / "... is still in progress."
_VERIFIED = re.compile(r"^Reassignment of partition (?P<topic>\S+)-(?P<p>\d+) is (?P<state>[a-z ]+?)\.?$", re.M)


@dataclass(frozen=True)
class Moving:
    """A reassignment in progress: its partition's replicas (the target and the replicas leaving), those being added
    and those being removed (broker ids)."""

    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def plan(moves: dict[tuple[str, int], list[int]]) -> dict[str, Any]:
    """The reassignment JSON moving each (topic, partition) of `moves` to its replicas (broker ids, the preferred
    leader first)."""
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                         for (t, p), r in sorted(moves.items())]}


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _tool(cluster: NodeControl, args: list[str], the_plan: dict[str, Any] | None = None) -> str:
    """Run the tool on the first broker whose Kafka runs, against that broker; its answer, or FaultSkipped
    quoting it when it fails or no broker runs."""
    node = next((n for n in cluster.nodes if cluster.is_running(n)), None)
    if node is None:
        raise FaultSkipped("no broker runs to reassign partitions from")
    files: list[str] = []
    if the_plan is not None:
        path = f"/tmp/kchaos-reassign-{uuid.uuid4().hex[:8]}.json"
        code, out = cluster.exec(node, ["sh", "-c", f"printf '%s' {shlex.quote(json.dumps(the_plan))} > {path}"])
        if code != 0:
            raise FaultSkipped(f"{node}: the reassignment plan could not be written: {out.strip()[-200:]}")
        files = ["--reassignment-json-file", path]
    try:
        return run_tool(cluster, node, "kafka-reassign-partitions", args[0],
                        [TOOL, "--bootstrap-server", cluster.listener(node), *args, *files])
    finally:
        if files:
            cluster.exec(node, ["rm", "-f", files[1]])


def execute(cluster: NodeControl, the_plan: dict[str, Any], throttle: int | None = None) -> str:
    """Start the plan's reassignments (`--execute --additional`: beside any already running), with the inter-broker
    `throttle` in bytes a second when given; the tool's last line."""
    args = ["--execute", "--additional", *(["--throttle", str(throttle)] if throttle else [])]
    return last_line(_tool(cluster, args, the_plan))


def verify(cluster: NodeControl, the_plan: dict[str, Any]) -> dict[tuple[str, int], str]:
    """Each (topic, partition) of the plan: "completed" or "still in progress" (`--verify`, which clears the
    throttles once every reassignment of the plan completed)."""
    out = _tool(cluster, ["--verify"], the_plan)
    return {(m["topic"], int(m["p"])): m["state"] for m in _VERIFIED.finditer(out)}


def cancel(cluster: NodeControl, the_plan: dict[str, Any]) -> str:
    """Cancel the plan's reassignments still in progress (`--cancel`); the tool's last line."""
    return last_line(_tool(cluster, ["--cancel"], the_plan))


def moving(cluster: NodeControl, topic: str) -> dict[int, Moving]:
    """The reassignments of `topic`'s partitions in progress (`--list`), by partition."""
    out = _tool(cluster, ["--list"])
    return {int(m["p"]): Moving(int(m["p"]), _ids(m["r"]), _ids(m["a"] or ""), _ids(m["x"] or ""))
            for m in _LISTED.finditer(out) if m["topic"] == topic}
