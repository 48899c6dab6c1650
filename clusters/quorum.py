"""The KRaft controller quorum's membership (KIP-853) as an operator changes it: Kafka's kafka-metadata-quorum
(MetadataQuorumCommand, Kafka 3.9+), run with the cluster's jars on its nodes."""
from __future__ import annotations

import json
import re

from kchaos.clusters.kraft import CONTROLLER_PORT
from kchaos.clusters.tools import last_line, run_tool
from kchaos.core.protocols import FaultSkipped, NodeControl

__all__ = ["TOOL", "add", "remove", "voters"]

TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
_VOTERS = re.compile(r"^CurrentVoters:\s*(\[.*\])\s*$", re.M)


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
