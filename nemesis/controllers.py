"""The KRaft controller quorum changing while brokers serve (KIP-853, Kafka 3.9+ with `--dynamic-quorum`): a
controller is removed from the voters, the active one by default, and added back at the mend, as operators replace
controllers. `remove-controller` leaves the removed controller running as an observer of the quorum;
`replace-controller` also replaces its disk once it is out (killed, its storage emptied, its metadata log with it,
formatted anew with a new directory id, started as an observer), so that the controller added back is a new voter
with the same id. The heal adds back every controller this nemesis removed."""
from __future__ import annotations

from typing import Any, cast

from kchaos.clusters import quorum
from kchaos.core.protocols import Disks, FaultSkipped, NodeControl
from kchaos.nemesis.base import targeted, while_refused

# Kafka refuses to add a voter that lags behind the leader's log: a controller just removed, or just replaced, is
# added once it has caught up.
ADD_WITHIN_S = 60.0
ADD_POLL_S = 2.0
COLORS = {"remove-controller": "#9467bd", "replace-controller": "#7b4173", "add-controller": "#c5b0d5"}


class RemoveController:
    """Remove controllers from the voters (`begin`; with `replace`, then replace their disks), add them back (`end`,
    `heal`)."""

    def __init__(self, cluster: NodeControl, replace: bool = False):
        self.cluster, self.replace = cluster, replace
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
        out = {"voters_before": self._names(before), "directory_id": before[me], "answer": answer}
        if self.replace:
            disks = cast(Disks, self.cluster)  # the runner hands every nemesis its whole Cluster, which replaces disks
            disks.kill(node)
            out["wiped"] = disks.wipe(node, everything=True)
            disks.start(node)
        return out

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Add the removed controllers back, each once it has caught up (`_add`); record the voters after and how
        many times each add was refused for lagging."""
        added, refused = {}, {}
        for n in nodes:
            added[n], refused[n] = self._add(n)
        self.removed = [n for n in self.removed if n not in nodes]
        out = {"added": added, "voters_after": self._names(self._voters(nodes[0]))} if nodes else {}
        return {**out, "lagging": {n: k for n, k in refused.items() if k}} if any(refused.values()) else out

    def _add(self, node: str) -> tuple[str, int]:
        """add-controller, as an operator does it: again every ADD_POLL_S while Kafka refuses it because the
        observer is still catching up with the metadata log, for up to ADD_WITHIN_S; the answer and the refusals."""
        return while_refused(lambda: quorum.add(self.cluster, node), "lagging behind", ADD_WITHIN_S, ADD_POLL_S)

    def heal(self) -> None:
        """Add back every controller this nemesis removed that is not a voter again."""
        for n in list(self.removed):
            if self.cluster.id_of(n) not in self._voters(n):
                self._add(n)
            self.removed.remove(n)


PACKAGES = (
    targeted("remove-controller", lambda c, cfg: RemoveController(c), start_f="remove-controller",
             stop_f="add-controller", targets=("controller",),
             colors={k: COLORS[k] for k in ("remove-controller", "add-controller")}),
    targeted("replace-controller", lambda c, cfg: RemoveController(c, replace=True), start_f="replace-controller",
             stop_f="add-controller", targets=("controller",),
             colors={k: COLORS[k] for k in ("replace-controller", "add-controller")}),
)
