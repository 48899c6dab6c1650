"""Page-cache loss: a node loses power. Its Kafka dies and every write it had not fsynced is gone.

The log directories live on lazyfs, a FUSE filesystem which holds
written data in memory until it is fsynced. `fault-ctl power-fail` freezes
Kafka, freezes lazyfs and takes its report (`powerfail`), SIGKILLs both, and
remounts: what comes back is what was synced or written back. Several nodes fail
in parallel, as in a shared power loss.

`torn-write` is the power failure in the middle of a writeback: `fault-ctl
power-fail torn SEED` has lazyfs write every file's unsynced data back except
the tail of its last write, of which only a prefix reaches the disk (its length
drawn from SEED, the op's `pick`, and the file's path). Its op is `power-fail`
too, so the checkers and reports treat it as the power loss it is.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kchaos.core.protocols import NodeControl
from kchaos.nemesis.base import last_json, targeted
from kchaos.nemesis.targets import NODE_ROLES

COLORS = {"power-fail": "#000000", "start": "#59a14f"}
TORN_COLORS = {"power-fail": "#6b2e8f", "start": "#59a14f"}
ANY = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller", *NODE_ROLES)


_M64 = (1 << 64) - 1


def torn_prefix(seed: int, path: str, length: int) -> int:
    """How many bytes of a `length`-byte last write to `path` (relative to the data directory) a torn-write with
    `seed` keeps: lazyfs's draw, splitmix64 of the seed xor the path's FNV-1a hash, modulo the length."""
    h = 0xCBF29CE484222325
    for b in path.encode():
        h = ((h ^ b) * 0x100000001B3) & _M64
    x = (seed ^ h) & _M64
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return (x ^ (x >> 31)) % length


def torn_files(loss: dict[str, Any]) -> list[dict[str, Any]]:
    """From one node's `lost` report: each file whose last write was torn, as {"path", "offset", "length",
    "kept", "torn"}: the write's offset and length, the bytes of it that reached the disk and those that did not."""
    out = []
    for f in loss.get("files") or []:
        t = f.get("torn") if isinstance(f, dict) else None
        if isinstance(t, dict) and all(isinstance(t.get(k), int) for k in ("offset", "length", "kept")):
            out.append({"path": f.get("path"), "offset": t["offset"], "length": t["length"], "kept": t["kept"],
                        "torn": t["length"] - t["kept"]})
    return out


class PowerFail:
    """Power-fails nodes at once; mending (and healing) starts Kafka on what survived.

    `torn`: a power failure in the middle of a writeback (`fault-ctl power-fail torn SEED`), SEED being the
    op's `pick`: every file keeps its unsynced data but the tail of its last write."""

    def __init__(self, cluster: NodeControl, torn: bool = False):
        self.cluster, self.torn = cluster, torn

    def _fail(self, node: str, seed: int | None = None) -> dict[str, Any]:
        stats = last_json(self.cluster.fault_ctl(node, "power-fail", *(() if seed is None else ("torn", str(seed)))))
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

        Torn (`torn-write`): `seed` is the op's `pick` (0 without one), and `lost` lists, for each file whose
        last write was torn, exactly the torn-away bytes as its one range, from the time of that write
        (`oldest_unix_ms`), with `torn: {offset, length, kept}`; files with no unsynced last write lose all their
        unsynced data as in a plain power failure. `torn[node]` repeats those files as
        {"path", "offset", "length", "kept", "torn"} (torn = length - kept bytes that did not reach the disk).
        """
        seed = int(op.get("pick") or 0) if self.torn else None
        with ThreadPoolExecutor(len(nodes)) as pool:
            lost = dict(zip(nodes, pool.map(lambda n: self._fail(n, seed), nodes)))
        if seed is None:
            return {"lost": lost}
        return {"seed": seed, "lost": lost, "torn": {n: torn_files(lost[n]) for n in nodes}}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Power the nodes back on: start Kafka."""
        for n in nodes:
            self.cluster.start(n)
        return {}

    def heal(self) -> None:
        """Start Kafka wherever it is down."""
        self.end(sorted(set(self.cluster.nodes) | set(self.cluster.controllers)))


def _power(name: str, targets: tuple[str, ...], torn: bool = False):
    return targeted(name, lambda c, cfg: PowerFail(c, torn), start_f="power-fail", stop_f="start", targets=targets,
                    colors=TORN_COLORS if torn else COLORS, needs_lazyfs=True)


PACKAGES = (_power("power-fail", ANY), _power("power-fail-leader", ("leader",)), _power("power-fail-all", ("all",)),
            _power("torn-write", ANY, torn=True))
