"""Kafka's on-disk logs decoded by Kafka's own tool, `kafka.tools.DumpLogSegments`.

`dump(libs, files, cwd, metadata=...)` runs the tool once for many segment
files (one JVM) with `--print-data-log`, adding `--cluster-metadata-decoder`
for the KRaft metadata log, and `parse_dump(lines)` turns its text into
`Batch`es. With `txn_log=True` it adds `--transaction-log-decoder`, for the
transaction coordinators' `__transaction_state` log (`txn_log.txn_states` reads
the records it prints), and with `share_log=True` `--share-group-state-decoder`, for the share
coordinators' `__share_group_state` log (`share_log.share_states`). The text format is the same in
Kafka 3.7 and 4.1 (checked against both): a `Dumping FILE` line per file, one `baseOffset: ...` line per batch
and one `| offset: ...` line per record, ending in `payload: TEXT` (the
metadata decoder prints each record as JSON there) or, for control records,
`controlType: NAME(N)` (3.7), `LeaderChange: {...}` and the like (4.1), or
`endTxnMarker: COMMIT coordinatorEpoch: N` (a transaction marker). `read_epoch_checkpoint` reads a partition's
leader-epoch-checkpoint file. Nothing here needs a cluster.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.core.jvm import SHORT_LIVED, archiving, class_archive
from kchaos.core.kafka_versions import OLD_DUMP_CLASS, dump_class

__all__ = ["DUMP_CLASS", "Batch", "DumpError", "Record", "dump", "dump_class_of", "metadata_records", "parse_dump",
           "read_epoch_checkpoint"]

DUMP_CLASS = OLD_DUMP_CLASS  # 3.7 to 4.2; org.apache.kafka.tools from 4.3 (core.kafka_versions)
DUMP_TIMEOUT_S = 600.0
_PAIR = re.compile(r"(\w+): (\S+)")
_RECORD = re.compile(r"^\| offset: (\d+) (?:CreateTime|LogAppendTime|NoTimestampType): (-?\d+)")
_CONTROL = re.compile(r"controlType: (\S+)|endTxnMarker: (\w+)(?: coordinatorEpoch: (-?\d+))?|(\w+): (\{.*\})\s*$")
_KEY = re.compile(r" key: (.*)$")


class DumpError(RuntimeError):
    """DumpLogSegments could not be run or failed; the message quotes its output."""


@dataclass(frozen=True)
class Record:
    """One record of a batch as DumpLogSegments printed it.

    `payload` is the value as text (the default StringDecoder; JSON for the
    metadata decoder), None for a control record, whose kind is `control`
    (e.g. "LEADER_CHANGE", "LeaderChange", "COMMIT") with its JSON in
    `control_json` when the tool printed it, and a transaction marker's
    `coordinator_epoch`. `key` is the record's key as printed, when it was
    (the transaction-log decoder prints `transaction_metadata::transactionalId=ID`).
    """

    offset: int
    time_ms: int
    payload: str | None
    control: str | None = None
    control_json: str | None = None
    coordinator_epoch: int | None = None
    key: str | None = None


@dataclass(frozen=True)
class Batch:
    """One record batch of a segment file: its header fields and its records."""

    file: str
    base_offset: int
    last_offset: int
    leader_epoch: int
    time_ms: int
    is_control: bool
    producer_id: int
    records: tuple[Record, ...]
    producer_epoch: int = -1

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form; records as [offset, payload] pairs (control records as [offset, null])."""
        return {"file": self.file, "base_offset": self.base_offset, "last_offset": self.last_offset,
                "leader_epoch": self.leader_epoch, "create_time_ms": self.time_ms, "is_control": self.is_control,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "records": [[r.offset, r.payload] for r in self.records]}


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise DumpError("no java on PATH (or JAVA_HOME): DumpLogSegments cannot run")
    return found


def dump_class_of(libs: Path) -> str:
    """The DumpLogSegments class of the Kafka jars in `libs`, by the release its kafka_2.13 jar names (the 3.7
    class when none does)."""
    for jar in Path(libs).glob("kafka_2.13-*.jar"):
        if m := re.fullmatch(r"kafka_2\.13-(\d+\.\d+\.\d+)\.jar", jar.name):
            return dump_class(m.group(1))
    return DUMP_CLASS


def dump(libs: Path, files: Sequence[str], cwd: Path, *, metadata: bool = False, txn_log: bool = False,
         share_log: bool = False) -> list[str]:
    """Run DumpLogSegments over `files` (paths relative to `cwd`) in one JVM; return its stdout lines.

    `metadata` decodes the KRaft metadata log's records, `txn_log` the
    transaction coordinators' (`__transaction_state`), `share_log` the share
    coordinators' (`__share_group_state`, Kafka 4.1 and later).

    Paths are passed relative so that no comma in a run directory's path can
    split the tool's comma-separated --files. Raises DumpError when java is
    missing, the tool exits non-zero or runs longer than DUMP_TIMEOUT_S.
    """
    if not files:
        return []
    bad = [f for f in files if "," in f]
    if bad:
        raise DumpError(f"file names with a comma cannot be passed to DumpLogSegments: {bad[:3]}")
    java, classpath, cls = _java(), f"{Path(libs).resolve()}/*", dump_class_of(libs)
    mode = [flag for flag, on in (("--cluster-metadata-decoder", metadata), ("--transaction-log-decoder", txn_log),
                                  ("--share-group-state-decoder", share_log)) if on][:1]

    def run(archive: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([java, "-Xmx512m", *SHORT_LIVED, *archive, "-cp", classpath, cls,
                                   "--files", ",".join(files), "--print-data-log", *mode],
                                  cwd=cwd, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, errors="replace")
        except subprocess.TimeoutExpired:
            raise DumpError(f"DumpLogSegments ran longer than {DUMP_TIMEOUT_S:.0f}s on {len(files)} files") from None
    with class_archive(java, "dump-log-segments", classpath, cls, *mode) as archive:
        proc = run(archive)
    if proc.returncode != 0 and archiving(archive):
        proc = run([])  # a JVM that could not write its archive fails as it exits: the dump alone decides
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise DumpError(f"DumpLogSegments exited {proc.returncode}: {tail}")
    return proc.stdout.splitlines()


def _int(fields: dict[str, str], key: str, default: int = -1) -> int:
    try:
        return int(fields[key])
    except (KeyError, ValueError):
        return default


def _record(line: str) -> Record | None:
    m = _RECORD.match(line)
    if not m:
        return None
    offset, t = int(m.group(1)), int(m.group(2))
    head, sep, payload = line.partition(" payload: ")
    if sep:
        k = _KEY.search(head)
        return Record(offset, t, payload, key=k.group(1) if k else None)
    c = _CONTROL.search(line)
    if c is None:
        return Record(offset, t, None, "unknown")
    if c.group(1):
        return Record(offset, t, None, c.group(1).split("(")[0])
    if c.group(2):
        return Record(offset, t, None, c.group(2), coordinator_epoch=int(c.group(3)) if c.group(3) else None)
    return Record(offset, t, None, c.group(4), c.group(5))


def parse_dump(lines: Iterable[str], notes: list[str] | None = None) -> Iterator[Batch]:
    """The batches of DumpLogSegments output, in order, each with the file it came from.

    A record line belongs to the batch line before it. Lines of any other
    shape (the tool's warnings about invalid bytes or index problems) are
    appended to `notes` when given, never silently dropped.
    """
    file = ""
    head: dict[str, str] | None = None
    records: list[Record] = []

    def flush() -> Batch | None:
        if head is None:
            return None
        return Batch(file, _int(head, "baseOffset"), _int(head, "lastOffset"), _int(head, "partitionLeaderEpoch"),
                     _int(head, "CreateTime", _int(head, "LogAppendTime")), head.get("isControl") == "true",
                     _int(head, "producerId"), tuple(records), _int(head, "producerEpoch"))

    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith("Dumping "):
            if (b := flush()) is not None:
                yield b
            head, records, file = None, [], line[len("Dumping "):].strip()
        elif line.startswith("baseOffset:"):
            if (b := flush()) is not None:
                yield b
            head, records = dict(_PAIR.findall(line)), []
        elif line.startswith("| offset:"):
            rec = _record(line)
            if rec is not None and head is not None:
                records.append(rec)
            elif notes is not None:
                notes.append(f"{file}: unparsed record line: {line[:200]}")
        elif line.startswith(("Log starting offset:", "Starting offset:")) or not line.strip():
            continue
        elif notes is not None:
            notes.append(f"{file}: {line[:300]}")
    if (b := flush()) is not None:
        yield b


def metadata_records(batches: Iterable[Batch]) -> Iterator[dict[str, Any]]:
    """The KRaft metadata log's records as `{"offset", "time_ms", "type", "version", "data"}`.

    `type` is the decoder's record type (e.g. "PARTITION_CHANGE_RECORD");
    control records (the quorum's leader changes) come as type "CONTROL:<kind>"
    with whatever JSON the tool printed as data. Payloads that are not JSON
    objects come as type "UNPARSED" with the text in data["text"].
    """
    for b in batches:
        for r in b.records:
            base = {"offset": r.offset, "time_ms": r.time_ms, "leader_epoch": b.leader_epoch}
            if r.payload is None:
                data: Any = {}
                if r.control_json:
                    try:
                        data = json.loads(r.control_json)
                    except ValueError:
                        data = {"text": r.control_json}
                yield {**base, "type": f"CONTROL:{r.control}", "version": None, "data": data}
                continue
            try:
                obj = json.loads(r.payload)
            except ValueError:
                obj = None
            if not isinstance(obj, dict) or "type" not in obj:
                yield {**base, "type": "UNPARSED", "version": None, "data": {"text": r.payload}}
                continue
            yield {**base, "type": obj["type"], "version": obj.get("version"), "data": obj.get("data") or {}}


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """A leader-epoch-checkpoint file's entries as Kafka reads them (`parse_epoch_checkpoint`); None if the file
    cannot be read or Kafka's reader would refuse it."""
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    return parse_epoch_checkpoint(text)


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_int(text: str) -> int:
    """Integer.parseInt's answer: no surrounding blanks or underscores, as Python's int() would allow."""
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(text)
    return int(text)


def parse_epoch_checkpoint(text: str) -> list[tuple[int, int]] | None:
    """A leader-epoch-checkpoint's text as Kafka's CheckpointFile reader takes it: its entries as (epoch, start
    offset), in file order, or None where that reader throws, which takes the broker's log directory offline.

    The format: a version line (0), a count line, then one "EPOCH START_OFFSET" line per entry. Like Kafka's
    reader, a file that ends before its count line holds no entries; every line after the count must be an entry
    of exactly two numbers, and there must be as many entries as the count says. So a file cut short inside its
    entries (a write torn by a power failure) is refused, while one cut before its count line reads as empty.
    """
    lines = text.splitlines()
    try:
        if not lines:
            return []
        if _java_int(lines[0]) != 0:
            return None
        if len(lines) == 1:
            return []
        n = _java_int(lines[1])
        out = []
        for line in lines[2:]:
            fields = re.split(r"\s+", line)
            while fields and not fields[-1]:  # Java's String.split drops trailing empty strings
                fields.pop()
            if len(fields) != 2:
                return None
            out.append((_java_int(fields[0]), _java_int(fields[1])))
    except ValueError:
        return None
    return out if len(out) == n else None
