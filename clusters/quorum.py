"""The KRaft controller quorum: each controller's view of its election, from the file Kafka keeps it in, and its
membership (KIP-853) as an operator changes it with Kafka's kafka-metadata-quorum (MetadataQuorumCommand, Kafka
3.9+), run with the cluster's jars on its nodes."""
from __future__ import annotations

import json
import re

from kchaos.clusters.kraft import CONTROLLER_PORT
from kchaos.clusters.tools import last_line, run_tool
from kchaos.core.protocols import FaultSkipped, NodeControl

__all__ = ["TOOL", "add", "elections", "remove", "unsettled", "voters"]

TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
_VOTERS = re.compile(r"^CurrentVoters:\s*(\[.*\])\s*$", re.M)


def elections(cluster: NodeControl, nodes: list[str] | None = None) -> dict[str, tuple[int, int] | None]:
    """Each controller's view of the election (of `nodes`, else of all): node -> (leader id, epoch), the leader
    -1 while it knows none (a candidate, or a voter that has only voted); None where it cannot be read.

    The view is the `quorum-state` file, which a controller rewrites before it acts on each lasting change
    of it (a vote, a candidacy, a leader learned or become)."""
    out: dict[str, tuple[int, int] | None] = {}
    for node in cluster.controllers if nodes is None else nodes:
        code, text = cluster.exec(node, ["cat", f"{cluster.data_dir(node)}/__cluster_metadata-0/quorum-state"])
        try:
            state = json.loads(text) if code == 0 else {}
        except json.JSONDecodeError:
            state = {}
        epoch = state.get("leaderEpoch") if isinstance(state, dict) else None
        out[node] = (int(state.get("leaderId", -1)), epoch) if isinstance(epoch, int) else None
    return out


def unsettled(views: dict[str, tuple[int, int] | None]) -> str | None:
    """Why the controllers' views (`elections`) do not yet agree on one leader at one epoch, in a line; None when
    every readable view names the same leader and epoch, or none can be read."""
    seen = {node: v for node, v in views.items() if v is not None}
    agreed = set(seen.values())
    if not seen or (len(agreed) == 1 and next(iter(agreed))[0] >= 0):
        return None
    return "the KRaft controllers do not agree on one leader: " + ", ".join(
        f"{node} sees {f'leader {leader}' if leader >= 0 else 'no leader'} at epoch {epoch}"
        for node, (leader, epoch) in seen.items())


def _bootstrap(cluster: NodeControl, but: str | None = None) -> str:
    """Every controller's address but `but`'s, as --bootstrap-controller takes them."""
    return ",".join(f"{cluster.address(n)}:{CONTROLLER_PORT}" for n in cluster.controllers if n != but)


def _run(cluster: NodeControl, node: str, args: list[str], what: str) -> str:
    return run_tool(cluster, node, "kafka-metadata-quorum", f"{what} on {node}", [TOOL, *args])


def voters(cluster: NodeControl, via: str) -> dict[int, str]:
    """The quorum's voters now (`describe --status`, asked from node `via`): Kafka id -> log directory id."""
    out = _run(cluster, via, ["--bootstrap-controller", _bootstrap(cluster), "describe", "--status"], "describe")
    m = _VOTERS.search(out)
    if m is None:
        raise FaultSkipped(f"kafka-metadata-quorum describe on {via} named no voters: {out.strip()[-200:]}")
    return {int(v["id"]): str(v.get("directoryId") or "") for v in json.loads(m.group(1))}


def remove(cluster: NodeControl, node: str, directory_id: str) -> str:
    """Remove controller `node` (with its log directory id) from the voters, asking the other controllers; the
    tool's last line. The node keeps running, an observer of the quorum."""
    out = _run(cluster, node, ["--bootstrap-controller", _bootstrap(cluster, but=node), "remove-controller",
                               "--controller-id", str(cluster.id_of(node)), "--controller-directory-id", directory_id],
               "remove-controller")
    return last_line(out)


def add(cluster: NodeControl, node: str) -> str:
    """Add controller `node` to the voters: the tool run on the node itself, with its own configuration (its id,
    listener and log directory id); the tool's last line."""
    out = _run(cluster, node, ["--command-config", cluster.conf_file(node), "--bootstrap-controller",
                               _bootstrap(cluster, but=node), "add-controller"], "add-controller")
    return last_line(out)
