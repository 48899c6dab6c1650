"""Kafka's own files copied out of a cluster before it is torn down: the evidence behind every loss.

`collect(cluster, topic, dest)` copies, from every node's data directory as
Kafka sees it (through lazyfs), the test topic's partition directories
(`<topic>-<p>/`: the `.log` segments, `leader-epoch-checkpoint`,
`partition.metadata`), the transaction coordinators' log (`__transaction_state-<p>/`, the same files:
each transaction's state changes, with the time the coordinator wrote them), the share coordinators' log
(`__share_group_state-<p>/`: each share group's delivery state of each partition) and the KRaft metadata log
(`__cluster_metadata-0/`: its `.log` segments and `quorum-state`) into `dest/<node>/...`, and writes
`dest/collect.json` saying what was copied and what was skipped. A node
whose topic data exceeds `cap_bytes` keeps only its metadata log (the
skip is recorded). Best effort: a node that cannot be read is recorded with
its error, never raised.
"""
from __future__ import annotations

import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from kchaos.evidence.files import COLLECT_FILE, METADATA_DIR, SHARE_STATE_DIR, TXN_STATE_DIR

__all__ = ["CAP_BYTES", "COLLECT_FILE", "METADATA_DIR", "NodeCopy", "collect", "wanted"]

log = logging.getLogger("kchaos.evidence")
CAP_BYTES = 256 * 1024 * 1024  # topic data per node
COORDINATOR_LOGS = (TXN_STATE_DIR, SHARE_STATE_DIR)  # the coordinators' logs, in partitions like a topic's
_TOPIC_FILES = re.compile(r"(.*\.log|leader-epoch-checkpoint|partition\.metadata)$")
_METADATA_FILES = re.compile(r"(.*\.log|quorum-state|leader-epoch-checkpoint|partition\.metadata)$")


class Copier(Protocol):
    """What `collect` needs of a cluster (clusters.cluster.KafkaCluster has it)."""

    specs: list[Any]

    def exec(self, node: str, cmd: list[str]) -> tuple[int, str]: ...

    def data_dir(self, node: str) -> str: ...

    def copy_out(self, node: str, directory: str, files: list[str], dest: Path) -> int: ...


@dataclass(frozen=True)
class NodeCopy:
    """What was copied from one node: files, bytes, and why anything was left out."""

    node: str
    files: int
    bytes: int
    topic_bytes: int
    skipped: str | None = None
    error: str | None = None


def wanted(rel: str, topic: str) -> bool:
    """Whether a data-directory file (path relative to it) is evidence: see the module docstring."""
    parts = rel.split("/")
    if len(parts) != 2:
        return False
    folder, name = parts
    if folder == METADATA_DIR:
        return bool(_METADATA_FILES.fullmatch(name))
    return (bool(re.fullmatch(f"({'|'.join(map(re.escape, (topic, *COORDINATOR_LOGS)))})" + r"-\d+", folder))
            and bool(_TOPIC_FILES.fullmatch(name)))


def _listing(cluster: Copier, node: str) -> list[tuple[str, int]]:
    data_dir = cluster.data_dir(node)
    code, out = cluster.exec(node, ["find", data_dir, "-mindepth", "2", "-maxdepth", "2", "-type", "f",
                                    "-printf", "%s %P\\n"])
    if code != 0:
        raise RuntimeError(f"listing {data_dir} failed ({code}): {out.strip()[-200:]}")
    files = []
    for line in out.splitlines():
        size, _, rel = line.partition(" ")
        if size.isdigit() and rel:
            files.append((rel, int(size)))
    return files


def _one(cluster: Copier, node: str, topic: str, dest: Path, cap_bytes: int) -> NodeCopy:
    try:
        files = [(rel, size) for rel, size in _listing(cluster, node) if wanted(rel, topic)]
        meta = [rel for rel, _ in files if rel.startswith(METADATA_DIR + "/")]
        data = [(rel, size) for rel, size in files if not rel.startswith(METADATA_DIR + "/")]
        topic_bytes = sum(size for _, size in data)
        skipped = None
        if topic_bytes > cap_bytes:
            skipped = f"topic data {topic_bytes} bytes > cap {cap_bytes}: only the metadata log copied"
            data = []
        chosen = meta + [rel for rel, _ in data]
        n = cluster.copy_out(node, cluster.data_dir(node), chosen, dest / node)
        return NodeCopy(node, len(chosen), n, topic_bytes, skipped)
    except Exception as e:
        log.warning("evidence from %s not collected: %s", node, e)
        return NodeCopy(node, 0, 0, 0, error=f"{type(e).__name__}: {e}")


def collect(cluster: Copier, topic: str, dest: Path, cap_bytes: int = CAP_BYTES) -> list[NodeCopy]:
    """Copy every node's evidence into `dest/<node>/`, the nodes at once, and write `dest/collect.json`; return
    per-node results in the nodes' order."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    started = time.time()
    names = [spec.name for spec in cluster.specs]
    with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="evidence") as pool:  # the nodes at once
        out = list(pool.map(lambda n: _one(cluster, n, topic, dest, cap_bytes), names))
    (dest / COLLECT_FILE).write_text(json.dumps({
        "topic": topic, "data_dir": cluster.data_dir(cluster.specs[0].name), "cap_bytes": cap_bytes,
        "collected_unix_ms": int(started * 1000), "seconds": round(time.time() - started, 3),
        "nodes": [asdict(c) for c in out]}, indent=2) + "\n")
    return out
