"""A replaced disk: a broker crashes, its storage is emptied and formatted anew with the cluster's id, and it starts
again with the same id and no data, as after an operator swaps a failed disk. On Kafka 4.x the broker registers
after an unclean shutdown (KIP-966) with a new log directory id (KIP-858)."""
from __future__ import annotations

from typing import Any, cast

from kchaos.core.protocols import Disks
from kchaos.nemesis.base import targeted
from kchaos.nemesis.process import ANY, COLORS


class Wipe:
    """Kill Kafka on nodes and wipe their storage (`Disks.wipe`); mend by starting them."""

    def __init__(self, cluster: Disks):
        self.cluster = cluster

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """SIGKILL each node's Kafka (the disk failed under it), then wipe it; record what each wipe removed."""
        wiped = {}
        for n in nodes:
            self.cluster.kill(n)
            wiped[n] = self.cluster.wipe(n)
        return {"wiped": wiped}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Start Kafka on the wiped nodes: each rejoins empty and fetches its replicas from their leaders."""
        for n in nodes:
            self.cluster.start(n)
        return {}

    def heal(self) -> None:
        """Start Kafka everywhere it is down."""
        self.cluster.restore()


# A dedicated controller holds no partitions; replacing a voter's disk is the controller nemeses' to do.
TARGETS = tuple(t for t in ANY if t != "controller")
# cast: the runner hands every nemesis its whole Cluster, which replaces disks; `targeted` promises only NodeControl.
PACKAGES = (targeted("wipe", lambda c, cfg: Wipe(cast(Disks, c)), start_f="wipe", stop_f="start", targets=TARGETS,
                     colors={"wipe": "#7f7f7f", "start": COLORS["start"]}),)
