"""A run's Kafka evidence decoded: segments, metadata timeline, epoch checkpoints, broker log lines, clock.

`decode(run)` reads `RUN/evidence/raw/<node>/` (copied off the nodes
before the cluster was torn down), runs Kafka's DumpLogSegments from the
run's own Kafka version over every segment (one JVM for the topic's data,
one for the metadata logs), writes `RUN/evidence/segments.jsonl` (one line
per batch: node, partition, base/last offset, leader epoch, create time,
records as [offset, value], the value decoded as the history encodes it:
the decimal text of an integer) and `RUN/evidence/metadata.jsonl` (the
topic's partition states, broker fencing and registrations, features, each
with wall-clock and history time), and returns an `Evidence`.

History time (ns since history.jsonl was opened, monotonic) maps to wall
clock through test.json's `history_start_unix_ms`; without it, times are
unknown and the explanation says so.
"""
from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson

from kchaos.evidence import EvidenceError
from kchaos.evidence.broker_logs import LogEvent, read_node_logs
from kchaos.evidence.files import (
    COLLECT_FILE,
    EVIDENCE_DIR,
    HISTORY_START_KEY,
    METADATA_DIR,
    METADATA_FILE,
    RAW_DIR,
    SEGMENTS_FILE,
)
from kchaos.evidence.kafka_logs import Batch, DumpError, dump, metadata_records, parse_dump, read_epoch_checkpoint
from kchaos.evidence.kraft_metadata import MetadataLog, replay

__all__ = ["EVIDENCE_DIR", "Clock", "Evidence", "check_run", "decode", "decode_metadata", "history_clock", "value_of"]

START_KEY = HISTORY_START_KEY
_INT = re.compile(r"-?\d+")
# dump(libs, files, cwd, metadata=...) -> stdout lines: evidence.kafka_logs.dump, or a stand-in in tests.
Dumper = Callable[..., Sequence[str]]
# find_libs(test.json as a dict) -> the Kafka jars that decode the run's files: clusters.distribution.run_libs.
# Passed in by the caller, so that evidence never loads the cluster package.
FindLibs = Callable[[dict[str, Any]], Path]


@dataclass(frozen=True)
class Clock:
    """Maps history time (seconds since the history opened) to wall clock (unix ms) and back."""

    start_unix_ms: float | None
    source: str  # "test.json" or "unknown"

    def to_s(self, unix_ms: float | None) -> float | None:
        """History seconds of a wall-clock time (None when either is unknown)."""
        if unix_ms is None or self.start_unix_ms is None:
            return None
        return round((unix_ms - self.start_unix_ms) / 1000, 3)

    def to_unix_ms(self, seconds: float | None) -> float | None:
        """Wall-clock ms of a history time in seconds."""
        if seconds is None or self.start_unix_ms is None:
            return None
        return self.start_unix_ms + seconds * 1000


def history_clock(test: dict[str, Any]) -> Clock:
    """The run's Clock: test.json's stamp, which the runner writes the moment the history opens; unknown
    without one."""
    start = test.get(START_KEY)
    if isinstance(start, (int, float)):
        return Clock(float(start), "test.json")
    return Clock(None, "unknown")


def value_of(payload: str | None) -> int | str | None:
    """A record's payload as the history's value: the integer it spells, else the text itself."""
    if payload is not None and _INT.fullmatch(payload):
        return int(payload)
    return payload


@dataclass
class Evidence:
    """Everything decoded from a run's evidence/raw, keyed by (node, partition) where per replica."""

    run: Path
    topic: str
    nodes: list[str]
    batches: dict[tuple[str, int], list[Batch]]
    checkpoints: dict[tuple[str, int], list[tuple[int, int]] | None]
    metadata: MetadataLog | None
    metadata_node: str | None
    log_events: list[LogEvent]
    clock: Clock
    collect: dict[str, Any]
    test: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def holders(self) -> dict[tuple[int, Any], list[tuple[str, int, int]]]:
        """(partition, value) -> [(node, offset, leader epoch)] for every record any replica still holds."""
        out: dict[tuple[int, Any], list[tuple[str, int, int]]] = {}
        for (node, p), bs in self.batches.items():
            for b in bs:
                for r in b.records:
                    if r.payload is not None:
                        out.setdefault((p, value_of(r.payload)), []).append((node, r.offset, b.leader_epoch))
        return out

    def log_end(self, node: str, partition: int) -> int | None:
        """One past the last offset in the replica's segments now (None when its data was not collected)."""
        if (node, partition) not in self.batches:
            return None
        return max((b.last_offset + 1 for b in self.batches[(node, partition)]), default=0)


# The last few tool outputs this process read, by what they were read from: a run checked and then explained in one
# process (`kchaos run`) decodes its files once.
_DUMPS: OrderedDict[tuple[Any, ...], Sequence[str]] = OrderedDict()
_DUMPS_LOCK = threading.Lock()  # the metadata log is dumped in a thread of its own, beside the segments
MAX_DUMPS = 4
# decode's results in this process, by run: its inputs' and its outputs' stats when it wrote them, and the Evidence.
_DECODED: OrderedDict[str, tuple[tuple[Any, ...], tuple[Any, ...], Evidence]] = OrderedDict()


def dumped(dumper: Dumper, libs: Path, files: Sequence[str], cwd: Path, **kw: Any) -> Sequence[str]:
    """`dumper(libs, files, cwd, **kw)`, or its output from an earlier call on the same files unchanged (their
    sizes and modification times) in this process."""
    stats = tuple((f, (s := (Path(cwd) / f).stat()).st_size, s.st_mtime_ns) for f in files)
    key = (dumper, str(libs), str(cwd), stats, tuple(sorted(kw.items())))
    with _DUMPS_LOCK:
        if key in _DUMPS:
            _DUMPS.move_to_end(key)
            return _DUMPS[key]
    out = list(dumper(libs, files, cwd, **kw))
    with _DUMPS_LOCK:
        _DUMPS[key] = out
        while len(_DUMPS) > MAX_DUMPS:
            _DUMPS.popitem(last=False)
    return out


def _no_libs(test: dict[str, Any]) -> Path:
    raise RuntimeError("no Kafka jars to decode with (the caller passed neither libs nor find_libs)")


def _segment_files(raw: Path, folder: Callable[[str], bool]) -> list[str]:
    return sorted(str(f.relative_to(raw)) for f in raw.glob("*/*/*.log") if folder(f.parent.name))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "wb") as fh:
        fh.writelines(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS) for r in rows)


def _decode_metadata(raw: Path, libs: Path, notes: list[str], dumper: Dumper
                     ) -> tuple[MetadataLog | None, str | None]:
    """The longest metadata log among the nodes (they are replicas of one Raft log), replayed."""
    files = _segment_files(raw, lambda d: d == METADATA_DIR)
    if not files:
        notes.append("no __cluster_metadata segments were collected: no leader/ISR timeline")
        return None, None
    per_node: dict[str, list[dict[str, Any]]] = {}
    for b in parse_dump(dumped(dumper, libs, files, raw, metadata=True), notes):
        node = b.file.split("/", 1)[0]
        per_node.setdefault(node, []).extend(metadata_records([b]))
    if not per_node:
        return None, None
    node = max(sorted(per_node), key=lambda n: max((r["offset"] for r in per_node[n]), default=-1))
    records = sorted(per_node[node], key=lambda r: r["offset"])
    if records and records[0]["offset"] > 0:
        notes.append(f"{node}'s metadata log starts at offset {records[0]['offset']} (older records were "
                     "snapshotted away): partitions created before it have no timeline")
    return replay(records), node


def decode_metadata(run: Path, find_libs: FindLibs, dumper: Dumper = dump) -> tuple[MetadataLog | None, list[str]]:
    """The run's KRaft metadata log replayed (the longest copy among its nodes), with notes on what was missing; the
    tool's output is kept in this process, so a later `decode` of the same files does not run it again. (None,
    [why]) for a run without a metadata log, a test.json or the jars to decode with."""
    run = Path(run)
    notes: list[str] = []
    try:
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))
        meta, _ = _decode_metadata(run / EVIDENCE_DIR / RAW_DIR, find_libs(test), notes, dumper)
    except (DumpError, OSError, RuntimeError, ValueError) as e:
        return None, [*notes, f"metadata log not decoded: {e}"]
    return meta, notes


def _metadata_rows(meta: MetadataLog, topic: str, clock: Clock) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for (t, _), states in meta.states.items():
        if t == topic:
            rows += [{"type": "partition", "time_s": clock.to_s(s.time_ms), **s.to_dict()} for s in states]
    rows += [{"type": "broker", "time_s": clock.to_s(b.time_ms), **b.to_dict()} for b in meta.brokers]
    rows.sort(key=lambda r: r["offset"])
    rows += [{"type": "feature", "name": k, "level": v} for k, v in sorted(meta.features.items())]
    return rows


def check_run(run: Path) -> None:
    """Raise EvidenceError unless `run` has a test.json and an evidence/raw directory (cheap; no decoding)."""
    run = Path(run)
    if not (run / "test.json").is_file():
        raise EvidenceError(f"{run}: no test.json (not a run directory?)")
    if not (run / EVIDENCE_DIR / RAW_DIR).is_dir():
        raise EvidenceError(f"{run}: no {EVIDENCE_DIR}/{RAW_DIR} (runs collect it before the cluster is torn down)")


def decode(run: Path, libs: Path | None = None, dumper: Dumper = dump, find_libs: FindLibs | None = None) -> Evidence:
    """Decode RUN/evidence/raw with Kafka's tools; write segments.jsonl and metadata.jsonl; return Evidence.

    Raises EvidenceError when there is no evidence/raw or no test.json; a
    DumpLogSegments failure becomes a note and an empty part, never a crash.
    `libs` are the Kafka jars; without them `find_libs` finds the run's own
    from its test.json (with neither, that is a note). `dumper` stands in for
    the tool. A run this process decoded before from the same files (and whose
    decoded files are still as written) is not decoded again: a copy of what
    that decode found is returned.
    """
    run = Path(run)
    raw = run / EVIDENCE_DIR / RAW_DIR
    check_run(run)
    inputs = (dumper, str(libs), find_libs, _stats(raw), _stats(run / "nodes"), _stats(run / "test.json"))
    outputs = (run / EVIDENCE_DIR / SEGMENTS_FILE, run / EVIDENCE_DIR / METADATA_FILE)
    if (was := _DECODED.get(str(run))) and was[0] == inputs and was[1] == _stats(*outputs):
        # Decoded in this process from these very files, and what it wrote is still there as written: a check
        # on a warm Spark, then its explanation, decode a run once.
        _DECODED.move_to_end(str(run))
        return dataclasses.replace(was[2], notes=list(was[2].notes))
    ev = _decode(run, raw, libs, dumper, find_libs)
    _DECODED[str(run)] = (inputs, _stats(*outputs), dataclasses.replace(ev, notes=list(ev.notes)))
    while len(_DECODED) > MAX_DUMPS:
        _DECODED.popitem(last=False)
    return ev


def _stats(*paths: Path) -> tuple[Any, ...]:
    """(path, size, mtime) of each file at or below `paths`, sorted; a missing path counts as none."""
    files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*") if p.is_dir() else [])
                   if f.is_file())
    return tuple((str(f), (st := f.stat()).st_size, st.st_mtime_ns) for f in files)


def _decode(run: Path, raw: Path, libs: Path | None, dumper: Dumper, find_libs: FindLibs | None) -> Evidence:
    try:
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise EvidenceError(f"{run}/test.json: not JSON ({e})") from None
    topic = (test.get("topic") or {}).get("name") or "kchaos"
    clock = history_clock(test)
    notes: list[str] = []
    collect: dict[str, Any] = {}
    if (raw / COLLECT_FILE).is_file():
        try:
            collect = json.loads((raw / COLLECT_FILE).read_text(encoding="utf-8"))
        except ValueError:
            notes.append(f"{RAW_DIR}/{COLLECT_FILE} is not JSON")
    for c in collect.get("nodes") or []:
        if c.get("skipped") or c.get("error"):
            notes.append(f"{c.get('node')}: {c.get('skipped') or c.get('error')}")
    nodes = sorted(p.name for p in raw.iterdir() if p.is_dir())
    is_topic = re.compile(re.escape(topic) + r"-(\d+)").fullmatch
    batches: dict[tuple[str, int], list[Batch]] = {}
    checkpoints: dict[tuple[str, int], list[tuple[int, int]] | None] = {}
    for node in nodes:
        for d in sorted((raw / node).iterdir()):
            if d.is_dir() and (m := is_topic(d.name)):
                batches[(node, int(m.group(1)))] = []
                checkpoints[(node, int(m.group(1)))] = read_epoch_checkpoint(d / "leader-epoch-checkpoint")
    meta, meta_node = None, None
    meta_notes: list[str] = []
    try:
        libs = libs or (find_libs or _no_libs)(test)
        files = _segment_files(raw, lambda d: bool(is_topic(d)))
        # Two JVMs at once: the metadata log's dump takes a second or two, which the segments' then hides.
        with ThreadPoolExecutor(1, thread_name_prefix="kchaos-dump-metadata") as pool:
            decoding = pool.submit(_decode_metadata, raw, libs, meta_notes, dumper)
            for b in parse_dump(dumped(dumper, libs, files, raw), notes):
                node, folder = b.file.split("/")[:2]
                # cast: the dumper was given only `files`, each in a folder is_topic matched
                batches[(node, int(cast(re.Match[str], is_topic(folder)).group(1)))].append(b)
            meta, meta_node = decoding.result()
        notes += meta_notes
    except (DumpError, OSError, RuntimeError) as e:
        notes.append(f"DumpLogSegments: {e}")
    out = run / EVIDENCE_DIR
    _write_jsonl(out / SEGMENTS_FILE, [
        {"node": node, "partition": p, **{k: v for k, v in b.to_dict().items() if k != "records"},
         "records": [[r.offset, value_of(r.payload)] for r in b.records]}
        for (node, p), bs in sorted(batches.items()) for b in bs])
    _write_jsonl(out / METADATA_FILE, _metadata_rows(meta, topic, clock) if meta else [])
    events = read_node_logs(run / "nodes", topic)
    return Evidence(run, topic, nodes, batches, checkpoints, meta, meta_node, events, clock, collect, test, notes)
