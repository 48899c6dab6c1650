"""Bit rot at rest: `corrupt` flips bits in a closed log segment of the test topic on a node, as Jepsen's
bitflip does, and the mend writes the original bytes back.

`fault-ctl corrupt DIR SEED N` does it on the node: it picks a closed segment of the partition directory
(never the newest one, which Kafka appends to), walks its record batches, and flips one bit in each of N
data batches, in a byte of a record's value (of any record byte when the batch is compressed). SEED is the
op's `pick`, drawn from the run's seed, so a replayed schedule flips the same bytes of the same file. The
original bytes are saved on the node before anything is written; `fault-ctl uncorrupt` puts them back where
the flipped byte is still there (a file Kafka has since truncated or rewritten is left alone, and said so),
as an operator restoring the file from a replica would.

Kafka re-reads a segment's checksums only when it recovers it after an unclean shutdown (segments past the
recovery point) and when a follower appends what it fetched; the leader serves stored batches as they are.
docs/nemeses.md says what each reader does with the flipped batch, measured.
"""
from __future__ import annotations

import json
import random
from typing import Any

from kchaos.core.config import TestConfig
from kchaos.core.protocols import FaultSkipped, NodeControl
from kchaos.nemesis.base import targeted

TARGETS = ("leader", "follower", "one")
FLIPS = 3  # bits flipped per fault, each in its own record batch


class Corrupt:
    """Flips bits in a closed segment of one partition on each target node; mending restores them."""

    def __init__(self, cluster: NodeControl, cfg: TestConfig, flips: int = FLIPS):
        self.cluster, self.topic, self.partitions, self.flips = cluster, cfg.topic.name, cfg.topic.partitions, flips

    def partition_dir(self, node: str, partition: int) -> str:
        """The directory of the test topic's `partition` in `node`'s log directory."""
        return f"{self.cluster.data_dir(node)}/{self.topic}-{partition}"

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Corrupt the op's partition (for `one`, a partition drawn from the op's pick) on every node of `nodes`.
        Records per node: the partition, the segment file, its size, how many segments were closed, and each
        flip's file position, bit, byte before and after, and the offsets of the record and batch it hit.
        FaultSkipped when no target has a closed segment yet (none rolled: see --segment-ms)."""
        pick = int(op.get("pick", 0))
        p = int(op["partition"]) if "partition" in op else random.Random(pick).randrange(self.partitions)
        done: dict[str, Any] = {}
        skipped: dict[str, str] = {}
        for n in nodes:
            out = json.loads(self.cluster.fault_ctl(n, "corrupt", self.partition_dir(n, p), str(pick),
                                                    str(self.flips)).strip().splitlines()[-1])
            if "skipped" in out:
                skipped[n] = out["skipped"]
            else:
                done[n] = {"partition": p, **out}
        if not done:
            raise FaultSkipped("; ".join(f"{n}: {why}" for n, why in skipped.items()))
        return {"nodes": sorted(done), "partition": p, "corrupted": done,
                **({"skipped": skipped} if skipped else {})}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Write the original bytes back on `nodes`; record what became of each position (restored, unchanged,
        changed: Kafka rewrote it, gone: Kafka deleted the file)."""
        out = {}
        for n in nodes:
            out[n] = json.loads(self.cluster.fault_ctl(n, "uncorrupt").strip().splitlines()[-1])["restored"]
        return {"restored": out}

    def heal(self) -> None:
        """Restore whatever any node still has flipped."""
        self.end(sorted(self.cluster.nodes))


PACKAGES = (targeted("corrupt", lambda c, cfg: Corrupt(c, cfg), start_f="corrupt", stop_f="restore",
                     targets=TARGETS, colors={"corrupt": "#8c564b", "restore": "#bab0ac"}),)
