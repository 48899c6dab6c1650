"""Does the cluster agree with itself at the end of a run? Checks on the evidence (docs/checkers.md).

- **Metadata agreement.** Each broker's own view of every partition (leader, replicas, ISR: evidence/views.json,
  sampled by `kchaos.clusters.views` until the brokers agree or the recovery time has passed) against the
  controllers' view: the KRaft metadata log replayed to the moment of the broker's answer. A broker whose view
  matches no state the log held in the `GRACE_MS` before it is a `metadata_divergence`: it kept a view the
  controllers had left behind (or never held). So is a replica whose broker last took (its state-change log) an
  older leader epoch, or the other role, than the log's state: its metadata cache moved on, its replica manager
  did not.
- **Replica agreement.** Every in-sync replica of each of the topic's partitions holds the same record batches below
  the high watermark: the same offsets and the same bytes (from the batch's attributes on, the part its CRC covers;
  the leader epoch field a leader stamps is left out), read from the segment files copied off the nodes. A replica
  that differs, or lacks batches, below the high watermark is a `replica_divergence`.
- **Elections** (`kchaos.evidence.elections`): each leader election in the log against the controllers' own word.

All are pure functions of the run's files; `agreement(run, meta)` composes them into results.json's `agreement`.
"""
from __future__ import annotations

import hashlib
import re
import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.evidence.broker_logs import read_node_logs
from kchaos.evidence.elections import elections_line, elections_section
from kchaos.evidence.explain.facts import node_names
from kchaos.evidence.files import EVIDENCE_DIR, RAW_DIR, VIEWS_FILE, read_json_object
from kchaos.evidence.kraft_metadata import MetadataLog, PartitionState

__all__ = ["GRACE_MS", "Digest", "agreement", "agreement_line", "batch_digests", "metadata_divergences",
           "replica_divergences"]

# A broker applies a metadata record some milliseconds after the controllers commit it: a view that matches the
# log as it stood this long before the broker answered is behind, not divergent.
GRACE_MS = 2000.0
MAX_EXAMPLES = 20
_HEADER = struct.Struct(">qi")  # baseOffset, batchLength (the bytes after this field)
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, at byte 23 of a v2 batch
_SEGMENT = re.compile(r"\d{20}\.log")


@dataclass(frozen=True)
class Digest:
    """One record batch of a replica: its first and last offset and a digest of its bytes from the attributes on."""

    base_offset: int
    last_offset: int
    digest: str


def batch_digests(folder: Path) -> list[Digest]:
    """The record batches of a partition directory's segments, in offset order. A batch cut off at a segment's end
    (a write torn by a crash) ends that segment's batches."""
    out: list[Digest] = []
    for seg in sorted(p for p in Path(folder).iterdir() if _SEGMENT.fullmatch(p.name)):
        data = seg.read_bytes()
        pos = 0
        while pos + _HEADER.size <= len(data):
            base, length = _HEADER.unpack_from(data, pos)
            end = pos + _HEADER.size + length
            if length < 49 or end > len(data):  # 49: a v2 batch's header after batchLength
                break
            last = base + _LAST_DELTA.unpack_from(data, pos + 23)[0]
            out.append(Digest(base, last, hashlib.blake2b(data[pos + 21:end], digest_size=12).hexdigest()))
            pos = end
    return out


def replica_divergences(replicas: Mapping[str, list[Digest]], high_watermark: int, leader: str | None
                        ) -> list[dict[str, Any]]:
    """The in-sync `replicas` (node -> its batches) of one partition that disagree below `high_watermark`: each
    replica that parts from the leader's (from the first replica's, when the leader's was not copied), and each that
    ends before the high watermark, as {node, reference, offset: where it parts or ends, missing: it lacks batches
    there}."""
    below = {n: [d for d in ds if d.base_offset < high_watermark] for n, ds in replicas.items()}
    if not below:
        return []
    ref = leader if leader in below else sorted(below)[0]
    out = []
    for node, ds in sorted(below.items()):
        theirs = below[ref]
        if node != ref and ds != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ds, theirs)) if a != b), min(len(ds), len(theirs)))
            parted = [x.base_offset for x in ds[at:at + 1] + theirs[at:at + 1]]
            out.append({"node": node, "reference": ref, "offset": min(parted), "missing": at >= len(ds)})
        elif (end := ds[-1].last_offset + 1 if ds else 0) < high_watermark:
            out.append({"node": node, "reference": ref, "offset": end, "missing": True})
    return out


def _key(replicas: Iterable[int], isr: Iterable[int], leader: int) -> tuple[Any, ...]:
    return leader, tuple(replicas), tuple(sorted(isr))


def _controller(s: PartitionState) -> dict[str, Any]:
    return {"leader": s.leader, "leader_epoch": s.leader_epoch, "replicas": list(s.replicas), "isr": sorted(s.isr),
            "elr": None if s.elr is None else sorted(s.elr), "offset": s.offset, "time_ms": s.time_ms}


def metadata_divergences(views: Mapping[str, Any], meta: MetadataLog | None, grace_ms: float = GRACE_MS
                         ) -> tuple[list[dict[str, Any]], list[str]]:
    """Each broker view of views.json that the metadata log contradicts, with both views, and notes on what could
    not be compared. Without the log (or a partition the log no longer replays), each broker is compared with the
    view most brokers hold."""
    at = float(views.get("time_ms") or 0)
    brokers: Mapping[str, list[dict[str, Any]]] = views.get("brokers") or {}
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    unreplayed: set[tuple[str, int]] = set()
    by_part: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for node, rows in brokers.items():
        for r in rows:
            by_part.setdefault((r["topic"], int(r["partition"])), {})[node] = r
    for (topic, p), seen in sorted(by_part.items()):
        states = meta.timeline(topic, p) if meta is not None else []
        held = [s for s in states if s.time_ms <= at]
        if not held:
            unreplayed.add((topic, p))
            common = Counter(_key(r["replicas"], r["isr"], r["leader"]) for r in seen.values()).most_common(1)[0][0]
            out += [{"node": n, "topic": topic, "partition": p, "broker": _view(r),
                     "others": {"leader": common[0], "replicas": list(common[1]), "isr": list(common[2])}}
                    for n, r in sorted(seen.items()) if _key(r["replicas"], r["isr"], r["leader"]) != common]
            continue
        recent = [s for s in held if s.time_ms >= at - grace_ms]
        before = [s for s in held if s.time_ms < at - grace_ms][-1:]
        allowed = {_key(s.replicas, s.isr, s.leader) for s in before + recent}
        for n, r in sorted(seen.items()):
            if _key(r["replicas"], r["isr"], r["leader"]) not in allowed:
                out.append({"node": n, "topic": topic, "partition": p, "broker": _view(r),
                            "controller": _controller(held[-1])})
    if unreplayed:
        why = "no metadata log was decoded" if meta is None else "the metadata log does not replay them"
        notes.append(f"{len(unreplayed)} partitions compared between brokers only ({why})")
    for node, err in sorted((views.get("errors") or {}).items()):
        notes.append(f"{node} did not answer: {err}")
    return out, notes


def role_divergences(nodes_dir: Path, views: Mapping[str, Any], meta: MetadataLog, names: Mapping[int, str]
                     ) -> list[dict[str, Any]]:
    """Each replica, on a broker that answered views.json, whose role its broker took last (the state-change log's
    `Leader|Follower <topic>-<p> ... starts at leader epoch E` lines, `kchaos.evidence.broker_logs`) is behind the
    metadata log's state when the views were taken: an older leader epoch, or at that epoch the wrong role. A broker
    whose metadata cache took a delta that its replica manager failed to apply answers Metadata requests rightly
    while it acts on the older state. A replica with no such line at all is not compared (its log may have rolled)."""
    at = float(views.get("time_ms") or 0)
    answered = set(views.get("brokers") or {})
    topics = sorted({r["topic"] for rows in (views.get("brokers") or {}).values() for r in rows})
    took: dict[tuple[str, str, int], tuple[str, int]] = {}
    for topic in topics:
        for e in read_node_logs(nodes_dir, topic):
            if e.kind in ("leader", "follower") and e.epoch is not None:
                took[(e.node, topic, e.partition)] = (e.kind, e.epoch)
    out: list[dict[str, Any]] = []
    for topic, p in sorted(k for k in meta.states if k[0] in topics):
        s = meta.state_at(str(topic), p, at)
        if s is None or s.leader < 0:
            continue
        for b in s.replicas:
            node = names.get(b)
            role = took.get((node, str(topic), p)) if node is not None and node in answered else None
            want = "leader" if b == s.leader else "follower"
            if role is not None and (role[1] < s.leader_epoch or (role[1] == s.leader_epoch and role[0] != want)):
                out.append({"node": node, "topic": topic, "partition": p,
                            "acts": {"role": role[0], "leader_epoch": role[1]}, "controller": _controller(s)})
    return out


def _view(r: Mapping[str, Any]) -> dict[str, Any]:
    return {"leader": r["leader"], "replicas": list(r["replicas"]), "isr": sorted(r["isr"])}


def agreement(run: Path, meta: MetadataLog | None, topic: str,
              corrupted: Iterable[tuple[str, int]] = ()) -> dict[str, Any] | None:
    """results.json's `agreement` for `run`: the counts `metadata_divergence` and `replica_divergence`, the
    divergences themselves (the first MAX_EXAMPLES of each), `allowed_replica_divergence` (replicas of the
    (node, partition) pairs in `corrupted`, whose bytes the corrupt nemesis flipped), what was compared and notes;
    None for a run without evidence/views.json (recorded before these checks existed)."""
    views = read_json_object(Path(run) / EVIDENCE_DIR / VIEWS_FILE)
    if views is None:
        return None
    divergent, notes = metadata_divergences(views, meta)
    names = {int(i): n for n, i in (views.get("ids") or {}).items() if i is not None}
    if meta is not None:
        divergent += role_divergences(Path(run) / "nodes", views, meta, {**node_names(run), **names})
    raw = Path(run) / EVIDENCE_DIR / RAW_DIR
    hws = {int(p): int(o) for p, o in (views.get("high_watermarks") or {}).items()}
    replica: list[dict[str, Any]] = []
    allowed: list[dict[str, Any]] = []
    compared = 0
    flipped = set(corrupted)
    for p, hw in sorted(hws.items()):
        leader, isr = _in_sync(views, meta, topic, p)
        held = {names[i]: raw / names[i] / f"{topic}-{p}" for i in isr if i in names}
        copied = {n: batch_digests(d) for n, d in held.items() if d.is_dir()}
        if len(copied) < len(held):
            notes.append(f"{topic}-{p}: {len(held) - len(copied)} in-sync replicas were not copied")
        compared += len(copied) > 1
        for d in replica_divergences(copied, hw, names.get(leader) if leader is not None else None):
            d = {"partition": p, "high_watermark": hw, **d}
            (allowed if (d["node"], p) in flipped or (d["reference"], p) in flipped else replica).append(d)
    out: dict[str, Any] = {
        "metadata_divergence": len(divergent), "replica_divergence": len(replica),
        "allowed_replica_divergence": len(allowed), "agreed": bool(views.get("agreed")),
        "rounds": views.get("rounds"), "within_s": views.get("within_s"), "partitions_compared": compared,
        "metadata_divergences": divergent[:MAX_EXAMPLES], "replica_divergences": replica[:MAX_EXAMPLES],
        "allowed_replica_divergences": allowed[:MAX_EXAMPLES], "names": {str(i): n for i, n in names.items()},
    }
    if meta is not None:
        out["elections"] = elections_section(meta, Path(run) / "nodes", {**node_names(run), **names})
    if notes:
        out["notes"] = notes
    return out


def _in_sync(views: Mapping[str, Any], meta: MetadataLog | None, topic: str, p: int
             ) -> tuple[int | None, tuple[int, ...]]:
    """The partition's leader and ISR when the views were taken: the controllers' (the metadata log), else the view
    most brokers held."""
    if meta is not None and (s := meta.state_at(topic, p, float(views.get("time_ms") or 0))) is not None:
        return s.leader, s.isr
    seen = [(r["leader"], tuple(r["isr"])) for rows in (views.get("brokers") or {}).values()
            for r in rows if r["topic"] == topic and int(r["partition"]) == p]
    return Counter(seen).most_common(1)[0][0] if seen else (None, ())


def agreement_line(section: Mapping[str, Any]) -> str:
    """results.json's `agreement` in a sentence or two, for report.html: the views and replicas, then the elections
    when the controllers' log and the metadata log disagree about one (`elections_line`)."""
    said = elections_line(section.get("elections") or {})
    return _views_line(section) + (f". {said}" if said else "")


def _views_line(section: Mapping[str, Any]) -> str:
    meta, rep = int(section.get("metadata_divergence") or 0), int(section.get("replica_divergence") or 0)
    allowed = int(section.get("allowed_replica_divergence") or 0)
    compared = int(section.get("partitions_compared") or 0)
    if not meta and not rep:
        flipped = f" (but {allowed} replicas the corrupt nemesis flipped)" if allowed else ""
        return ("The cluster agreed with itself at the end: every broker's view of the partitions was the "
                f"controllers', and the in-sync replicas of {compared} partition{'s' if compared != 1 else ''} held "
                f"the same batches below the high watermark{flipped}")
    parts = []
    if meta:
        d = (section.get("metadata_divergences") or [{}])[0]
        parts.append(f"{meta} broker view{'s' if meta != 1 else ''} of a partition differed from the controllers' "
                     f"after the recovery time (first: {d.get('node')} on {d.get('topic')}-{d.get('partition')})")
    if rep:
        d = (section.get("replica_divergences") or [{}])[0]
        parts.append(f"{rep} in-sync replica{'s' if rep != 1 else ''} held other batches than the leader below the "
                     f"high watermark (first: {d.get('node')} on partition {d.get('partition')} from offset "
                     f"{d.get('offset')})")
    return "The cluster did not agree with itself at the end: " + "; ".join(parts)
