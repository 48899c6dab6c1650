"""Page-cache loss: a node loses power. Its Kafka dies and every write it had not fsynced is gone.

The log directories live on lazyfs (see clusters/lazyfs.c), which holds
written data in memory until it is fsynced. `fault-ctl power-fail` freezes
Kafka, SIGKILLs it together with lazyfs, and remounts: what comes back is what
was synced. Several nodes fail in parallel, as in a shared power loss.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.protocols import Cluster
from nemesis.base import targeted

COLORS = {"power-fail": "#000000", "start": "#59a14f"}
ANY = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller")


class PowerFail:
    """Power-fails nodes at once; mending (and healing) starts Kafka on what survived."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def _fail(self, node: str) -> dict[str, Any]:
        out = self.cluster.fault_ctl(node, "power-fail")
        try:
            stats = json.loads(out.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            stats = {}
        return {"unsynced_bytes": stats.get("dirty_bytes"), "unsynced_files": stats.get("dirty_files")}

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Cut the power of every node in `nodes` in parallel; record what each lost."""
        with ThreadPoolExecutor(len(nodes)) as pool:
            lost = dict(zip(nodes, pool.map(self._fail, nodes)))
        return {"lost": lost}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Power the nodes back on: start Kafka."""
        for n in nodes:
            self.cluster.start(n)
        return {}

    def heal(self) -> None:
        """Start Kafka wherever it is down."""
        self.end(sorted(set(self.cluster.nodes) | set(self.cluster.controllers)))


def _power(name: str, targets: tuple[str, ...]):  # noqa: ANN202
    return targeted(name, lambda c, cfg: PowerFail(c), start_f="power-fail", stop_f="start", targets=targets,
                    colors=COLORS, needs_lazyfs=True)


PACKAGES = (_power("power-fail", ANY), _power("power-fail-leader", ("leader",)), _power("power-fail-all", ("all",)))
