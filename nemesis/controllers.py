"""The KRaft controller quorum changing while brokers serve (KIP-853, Kafka 3.9+ with `--dynamic-quorum`): a
controller is removed from the voters, the active one by default, and added back at the mend, as operators replace
controllers. A removed controller keeps running as an observer of the quorum; the heal adds back every controller
this nemesis removed."""
from __future__ import annotations

from typing import Any

from kchaos.clusters import quorum
from kchaos.core.protocols import FaultSkipped, NodeControl
from kchaos.nemesis.base import targeted

COLORS = {"remove-controller": "#9467bd", "add-controller": "#c5b0d5"}


class RemoveController:
    """Remove controllers from the voters (`begin`), add them back (`end`, `heal`)."""

    def __init__(self, cluster: NodeControl):
        self.cluster = cluster
        self.removed: list[str] = []

    def _voters(self, via: str) -> dict[int, str]:
        return quorum.voters(self.cluster, via)

    def _names(self, ids: dict[int, str]) -> list[str]:
        return sorted(self.cluster.node_of(i) or str(i) for i in ids)

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Remove `nodes[0]` from the voters (FaultSkipped when it is none, or the last one); record the voters
        before and the tool's answer."""
        node = nodes[0]
        before = self._voters(node)
        me = self.cluster.id_of(node)
        if me not in before:
            raise FaultSkipped(f"{node} is no voter of the quorum now")
        if len(before) == 1:
            raise FaultSkipped(f"{node} is the quorum's last voter")
        answer = quorum.remove(self.cluster, node, before[me])
        self.removed.append(node)
        return {"voters_before": self._names(before), "directory_id": before[me], "answer": answer}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Add the removed controllers back; record the voters after."""
        added = {n: quorum.add(self.cluster, n) for n in nodes}
        self.removed = [n for n in self.removed if n not in nodes]
        return {"added": added, "voters_after": self._names(self._voters(nodes[0]))} if nodes else {}

    def heal(self) -> None:
        """Add back every controller this nemesis removed that is not a voter again."""
        for n in list(self.removed):
            if self.cluster.id_of(n) not in self._voters(n):
                quorum.add(self.cluster, n)
            self.removed.remove(n)


PACKAGES = (targeted("remove-controller", lambda c, cfg: RemoveController(c), start_f="remove-controller",
                     stop_f="add-controller", targets=("controller",), colors=COLORS),)
