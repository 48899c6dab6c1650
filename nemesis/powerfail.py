"""Page-cache loss: a node loses power. Its Kafka dies and every write it had not fsynced is gone.

The log directories live on lazyfs (see clusters/lazyfs.c), which holds
written data in memory until it is fsynced. `fault-ctl power-fail` freezes
Kafka, freezes lazyfs and takes its report (`powerfail`), SIGKILLs both, and
remounts: what comes back is what was synced or written back. Several nodes fail
in parallel, as in a shared power loss.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from core.protocols import Cluster
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
        if not isinstance(stats, dict):
            stats = {}
        return {"unsynced_bytes": stats.get("dirty_bytes"), "unsynced_files": stats.get("dirty_files"),
                "at_unix_ms": stats.get("at_unix_ms"), "oldest_age_ms": stats.get("oldest_age_ms"),
                "files": stats.get("files")}

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Cut the power of every node in `nodes` in parallel; record what each lost.

        `lost[node]` is lazyfs's report, taken after it froze: from then until the SIGKILL nothing
        reached the node's disk, so the report is exactly what the node lost. `unsynced_bytes` and
        `unsynced_files`: dirty 4 KiB pages (in bytes) and files with any. `at_unix_ms`: the wall
        time of the report. `oldest_age_ms`: the age of the oldest dirty page (None when none).
        `files`: one entry per file with dirty pages, `{"path", "dirty_bytes", "oldest_age_ms",
        "oldest_unix_ms", "size", "ranges"}` (path relative to the data directory, None without a
        name; ranges `[from, to)` of lost bytes, page-aligned starts, at most 64, then
        `"ranges_cut": true`). A write that reached a file before its `oldest_unix_ms` survived
        (fsynced or written back); one at or after it, into a listed range, is gone. A file not
        listed lost nothing. Every key is None when lazyfs did not answer: then nothing says what survived.
        """
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
