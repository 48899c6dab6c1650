"""Per-process send streams, and their merge into the one ordered history.

A producer worker process (of `ProducerProcesses`) records its sends in
its own Arrow IPC stream, `history.parts/<name>.arrows`, instead of the
shared history.jsonl: packing an event into a fixed-size record costs a
fraction of a JSON line, and no lock or pipe is shared between processes. Every event carries the
same clock as the history (CLOCK_MONOTONIC nanoseconds since the history's
t0, which every process on the machine reads alike).

Crash safety: a background thread writes what was appended as one record
batch and flushes it to the OS at least every FLUSH_S. A SIGKILLed process
loses at most its last unflushed batch; the reader stops at a truncated
final batch and keeps every complete one.

A part may also be `history.parts/<name>.jsonl`: lines in the history's own
form without `index`, each starting with `{"time":`, as the Java client's
clients write them (workloads/java/KchaosQueueClients.java).

`merge_streams(run_dir)` (run by the harness after the workload, and by
`kchaos check` on a killed run's directory) interleaves the parts with
history.jsonl by time into one history.jsonl, renumbering `index`, and
removes the parts. It is atomic: killed at any point, running it again
finishes the job without losing or doubling an event.
"""
from __future__ import annotations

import heapq
import json
import os
import shutil
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

PARTS_DIR = "history.parts"
HISTORY = "history.jsonl"
FLUSH_S = 0.05
TYPES = ("invoke", "ok", "fail", "info")
SCHEMA = pa.schema([("time", pa.int64()), ("process", pa.int64()), ("type", pa.dictionary(pa.int8(), pa.string())),
                    ("partition", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()),
                    ("error", pa.string()), ("producer", pa.int64())])
TOPIC_KEY = b"kchaos.topic"
# An event is packed into one fixed-size record as it happens (one call, no per-field objects) and the
# batch is cut into columns with numpy at flush time; -1 stands for "no offset".
_ROW = struct.Struct("<qqbqqqq")
_ROW_DTYPE = np.dtype([("time", "<i8"), ("process", "<i8"), ("type", "i1"), ("partition", "<i8"),
                       ("value", "<i8"), ("offset", "<i8"), ("producer", "<i8")])
_CODE = {t: i for i, t in enumerate(TYPES)}
_TYPE_DICT = pa.array(TYPES, pa.string())


class SendStream:
    """The send events of one process: a `SendRecorder` writing `path`.

    Thread-safe; `counts` holds invoke/ok/fail/info totals. `close()` writes
    the rest and closes the file. The flusher waits FLUSH_S between batches
    with `wait(closed, FLUSH_S)`, true once closed: `threading.Event.wait` on
    the real clock, unless a test passes a manual clock's.
    """

    def __init__(self, path: Path, *, topic: str, t0_ns: int,
                 wait: Callable[[threading.Event, float], bool] = threading.Event.wait):
        self.path = Path(path)
        self.t0 = t0_ns
        self.counts = {"send": 0, "ok": 0, "fail": 0, "info": 0}
        self._rows = bytearray()
        self._errors: dict[int, str] = {}  # row number in _rows -> error text
        self._lock = threading.Lock()  # guards _rows and _errors; held only to append or swap
        self._write_lock = threading.Lock()  # serialises batch writes, off the senders' path
        self._fh = open(self.path, "wb")
        self._writer = pa.ipc.new_stream(self._fh, SCHEMA.with_metadata({TOPIC_KEY: topic.encode()}))
        self._closed = threading.Event()
        self._wait = wait
        self._flusher = threading.Thread(target=self._flush_loop, name="send-stream-flush", daemon=True)
        self._flusher.start()

    def sent(self, process: int, producer: int, partition: int, value: int) -> None:
        """Record the invocation of a send."""
        with self._lock:
            self._rows += _ROW.pack(time.monotonic_ns() - self.t0, process, 0, partition, value, -1, producer)
            self.counts["send"] += 1

    def done(self, process: int, producer: int, partition: int, value: int, type_: str,
             offset: int | None, error: str | None) -> None:
        """Record the completion of a send."""
        with self._lock:
            if error is not None:
                self._errors[len(self._rows) // _ROW.size] = error
            self._rows += _ROW.pack(time.monotonic_ns() - self.t0, process, _CODE[type_], partition, value,
                                    -1 if offset is None else offset, producer)
            self.counts[type_] += 1

    def flush(self) -> None:
        """Write what was appended since the last flush as one batch, and hand it to the OS."""
        with self._write_lock:
            with self._lock:
                rows, errors, self._rows, self._errors = self._rows, self._errors, bytearray(), {}
            if not rows or self._fh.closed:
                return
            self._writer.write_batch(_batch(rows, errors))
            self._fh.flush()

    def _flush_loop(self) -> None:
        while not self._wait(self._closed, FLUSH_S):
            self.flush()

    def close(self) -> None:
        """Flush, end the stream and close the file."""
        self._closed.set()
        self._flusher.join()
        self.flush()
        with self._write_lock:
            if not self._fh.closed:
                self._writer.close()
                self._fh.close()


def _batch(rows: bytearray, errors: dict[int, str]) -> pa.RecordBatch:
    a = np.frombuffer(rows, dtype=_ROW_DTYPE)
    err: list[str | None] = [None] * len(a)
    for i, e in errors.items():
        err[i] = e
    cols = [pa.array(a["time"]), pa.array(a["process"]),
            pa.DictionaryArray.from_arrays(pa.array(a["type"]), _TYPE_DICT),
            pa.array(a["partition"]), pa.array(a["value"]), pa.array(a["offset"], mask=a["offset"] < 0),
            pa.array(err, pa.string()), pa.array(a["producer"])]
    return pa.record_batch(cols, schema=SCHEMA)


def iter_stream(path: Path) -> tuple[str, Iterator[pa.RecordBatch]]:
    """The topic and every complete batch of a stream, read one at a time as they are iterated (a
    stream of a long run at full rate is gigabytes, and a merge needs only the next batch of each);
    a truncated tail (a killed writer) is dropped."""
    fh = open(path, "rb")
    try:
        reader = pa.ipc.open_stream(fh)
    except pa.ArrowInvalid:  # killed before the schema reached the file
        fh.close()
        return "", iter(())
    topic = (reader.schema.metadata or {}).get(TOPIC_KEY, b"").decode()

    def batches() -> Iterator[pa.RecordBatch]:
        with fh:
            try:
                yield from reader
            except (pa.ArrowInvalid, OSError):
                pass

    return topic, batches()


def _stream_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(time, JSON line without index) of each event of one stream, in its order."""
    topic, batches = iter_stream(path)
    head = f',"f":"send","topic":{json.dumps(topic)}'
    for b in batches:
        cols = [b.column(i).to_pylist() for i in range(len(SCHEMA))]
        for t, proc, typ, part, val, off, err, prod in zip(*cols):
            tail = "" if off is None else f',"offset":{off}'
            if err is not None:
                tail += f',"error":{json.dumps(err)}'
            yield t, (f'"time":{t},"process":{proc},"type":"{typ}"{head},"partition":{part},'
                      f'"value":{val},"producer":{prod}{tail}}}\n')


def _line_part(path: Path) -> Iterator[tuple[int, str]]:
    """(time, line without its opening brace) of each complete line of a part written as lines that start with
    `{"time":` (the Java client's queue clients), in file order; a torn last line (a killed writer) is dropped."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return
            yield int(line[8:line.index(",")]), line[1:]


def _history_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(time, line without its index) of each complete line of history.jsonl, in file order."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return  # the torn last line of a killed harness
            if line.startswith('{"index":') and ',"time":' in line[:40]:  # as History writes it
                body = line[line.index(",") + 1:]
                yield int(body[7:body.index(",")]), body
            else:
                rec = json.loads(line)
                rec.pop("index", None)
                yield int(rec.get("time") or 0), json.dumps(rec, separators=(",", ":"))[1:] + "\n"


def merge_streams(run_dir: Path) -> int:
    """Merge `history.parts/*.arrows` and `*.jsonl` into `history.jsonl` by time; return the lines it then holds.

    0 when there was nothing to merge. See the module docstring for atomicity.
    """
    run_dir = Path(run_dir)
    parts, done = run_dir / PARTS_DIR, run_dir / (PARTS_DIR + ".merged")
    merging = run_dir / (HISTORY + ".merging")
    if done.exists():  # a merge was cut short after its output was complete
        if merging.exists():
            os.replace(merging, run_dir / HISTORY)
        shutil.rmtree(done)
        return 0
    streams = sorted(parts.glob("*.arrows")) if parts.is_dir() else []
    line_parts = sorted(parts.glob("*.jsonl")) if parts.is_dir() else []
    if not streams and not line_parts:
        if parts.is_dir():
            shutil.rmtree(parts)
        return 0
    history = run_dir / HISTORY
    sources = [_stream_lines(p) for p in streams] + [_line_part(p) for p in line_parts]
    if history.exists():
        sources.append(_history_lines(history))
    merged = 0
    with open(merging, "w", encoding="utf-8") as out:
        for index, (_, body) in enumerate(heapq.merge(*sources, key=lambda x: x[0])):
            out.write(f'{{"index":{index},{body}')
            merged += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(parts, done)
    os.replace(merging, history)
    shutil.rmtree(done)
    return merged
