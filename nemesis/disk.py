"""A full disk: the node's log directory stops growing. Writes and file growth there fail with ENOSPC.

The log directory lives on lazyfs. `fault-ctl disk-full
HEADROOM` sets a limit of the data's current size (the files' apparent sizes,
`used_bytes`) plus HEADROOM bytes (`--disk-full-headroom`): the write that would
pass it is cut short to what fits, every later one fails with ENOSPC, and so do
truncates and fallocates that grow a file. Kafka takes the log directory offline;
with its only log directory (also the metadata log's) gone, a KRaft broker halts,
and its partitions move to the other replicas. The mend lifts the limit
(`fault-ctl disk-free`, the space is there again) and starts Kafka.
"""
from __future__ import annotations

from typing import Any

from kchaos.core.protocols import NodeControl
from kchaos.nemesis.base import last_json, outlive_lag, targeted
from kchaos.nemesis.targets import NODE_ROLES

COLORS = {"disk-full": "#8c564b", "disk-free": "#59a14f"}
SINGLE = ("one", "leader", "follower", "controller", *NODE_ROLES)


class DiskFull:
    """Fills the disk of nodes `headroom` bytes above what their data takes now; the mend frees it and starts
    Kafka."""

    def __init__(self, cluster: NodeControl, headroom: int):
        self.cluster, self.headroom = cluster, headroom
        self.refused: dict[str, int] = {}  # lazyfs's ENOSPC count when the fault began, per node

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Set the limit on every node in `nodes`; record it: `disk[node]` = {"headroom_bytes", "used_bytes",
        "limit_bytes"}, the data's size when the limit was set (the limit less the headroom) and the limit (None:
        lazyfs did not answer)."""
        disk = {}
        for n in nodes:
            s = last_json(self.cluster.fault_ctl(n, "disk-full", str(self.headroom)))
            limit = s.get("limit_bytes")
            disk[n] = {"headroom_bytes": self.headroom,
                       "used_bytes": limit - self.headroom if isinstance(limit, int) else None, "limit_bytes": limit}
            if isinstance(s.get("enospc"), int):
                self.refused[n] = s["enospc"]
        return {"disk": disk}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Lift the limit on `nodes`, then start Kafka there (it halted if the disk filled); record
        `disk[node]` = {"used_bytes", "limit_bytes", "refused"}: the data's size and the limit just before the
        lift, and how many writes lazyfs refused with ENOSPC meanwhile (None: not known)."""
        disk = {}
        for n in nodes:
            s = last_json(self.cluster.fault_ctl(n, "disk-free"))
            before, now = self.refused.pop(n, None), s.get("enospc")
            disk[n] = {"used_bytes": s.get("used_bytes"), "limit_bytes": s.get("limit_bytes"),
                       "refused": now - before if isinstance(now, int) and before is not None else None}
        for n in nodes:
            self.cluster.start(n)
        return {"disk": disk}

    def heal(self) -> None:
        """Lift every limit and start Kafka everywhere."""
        for n in sorted(set(self.cluster.nodes) | set(self.cluster.controllers)):
            self.cluster.fault_ctl(n, "disk-free")
            self.cluster.start(n)


PACKAGES = (
    targeted("disk-full", lambda c, cfg: DiskFull(c, cfg.nemesis.disk_full_headroom), start_f="disk-full",
             stop_f="disk-free", targets=SINGLE, colors=COLORS, duration=outlive_lag, needs_lazyfs=True),
)
