"""What one Spark task computes over row groups of history.parquet: stats, latency, series, nemesis lines.

`line_task([(run, path, row_groups), ...])` returns per run partial results the
driver merges (`merge_lines`): op counts, the partitions sends and drains named,
the time span (of every line, and of the sends' invocations), the hundredths of a second in
which sends were acknowledged, malformed records, latency samples per (f,
completion type), send counts per invocation epoch and per second of invocation
(with ok latency samples), and the nemesis lines. Definitions: docs/checkers.md
(`stats`, `latency_ms`, `timeline`).

Quantiles are the smallest latency with at least that fraction of operations
at or below it. A task keeps every latency of a group of up to SAMPLE (per
second: SECOND_SAMPLE) operations and an evenly ranked sample of larger
groups, each sample standing for its share, so quantiles are exact up to
that many operations and within 1/SAMPLE of rank beyond.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kchaos.checkers.sets import lexsort, unique

__all__ = ["OP_TYPES", "line_task", "merge_lines", "quantiles"]

OP_TYPES = ("invoke", "ok", "fail", "info")
LATENCY_FS = ("send", "poll")
LINE_FS = ("send", "poll", "drain")  # the client fs the line stats tell apart
SAMPLE = 10_000
SECOND_SAMPLE = 1_000
NS_PER_S = 1_000_000_000
NS_PER_CS = 10_000_000  # acknowledgements are placed to the hundredth of a second: an outage is a second or more
NULL = np.iinfo(np.int64).min
_COLUMNS = ["index", "time", "process", "type", "f", "partition", "value", "records", "latency_ns", "epoch",
            "nemesis", "detail", "_corrupt_record"]
SPAN = ("tmin", "tmax", "send_first", "send_last")  # the times merged by min or max, not summed
Sample = tuple[np.ndarray, np.ndarray]  # sorted values, their weights


def _sample(values: np.ndarray, k: int) -> Sample:
    """`values` sorted, or k+1 evenly ranked of them each weighing its share."""
    values = np.sort(values)
    n = len(values)
    if n <= k:
        return values, np.ones(n)
    at = np.linspace(0, n - 1, k + 1).round().astype(np.int64)
    return values[at], np.full(len(at), n / len(at))


def quantiles(samples: list[Sample], qs: list[float]) -> list[float | None]:
    """The q-quantile of the merged samples for each q: the smallest value with weight >= q * total at or below it."""
    values = np.concatenate([s[0] for s in samples]) if samples else np.zeros(0)
    if not len(values):
        return [None] * len(qs)
    weights = np.concatenate([s[1] for s in samples])
    order = np.argsort(values, kind="stable")
    values, cum = values[order], np.cumsum(weights[order])
    total = cum[-1]
    out = []
    exact = bool(np.all(weights == 1))
    for q in qs:
        rank = max(np.ceil(q * total), 1) if exact else q * total
        out.append(values[min(int(np.searchsorted(cum, rank)), len(values) - 1)].item())
    return out


def _codes(t: pa.Table, name: str, names: tuple[str, ...]) -> np.ndarray:
    """The column's strings as their place in `names`: -1 for any other string, -2 for null."""
    col = t.column(name).combine_chunks().cast(pa.string())
    at = pc.index_in(col, value_set=pa.array(names)).fill_null(-1).to_numpy(zero_copy_only=False)
    if col.null_count:
        at = np.where(col.is_null().to_numpy(zero_copy_only=False), -2, at)
    return at


def _ints(t: pa.Table, name: str) -> np.ndarray:
    return t.column(name).combine_chunks().cast(pa.int64()).fill_null(NULL).to_numpy(zero_copy_only=False)


def line_task(pieces: list[tuple[int, str, list[int]]]) -> dict[int, dict[str, Any]]:
    """Partial line results per run for the row groups `pieces` names (see the module doc)."""
    tables: dict[int, list[pa.Table]] = defaultdict(list)
    for run, path, groups in pieces:
        tables[run].append(pq.ParquetFile(path).read_row_groups(groups, columns=_COLUMNS))
    return {run: _lines(pa.concat_tables(ts)) for run, ts in tables.items()}


def _lines(t: pa.Table) -> dict[str, Any]:
    # Strings compared as small integer codes: numpy object arrays compare in Python, per element.
    proc = _codes(t, "process", ("nemesis",))
    type_ = _codes(t, "type", OP_TYPES)
    f = _codes(t, "f", LINE_FS)
    send_f, poll_f, drain_f = (LINE_FS.index(x) for x in ("send", "poll", "drain"))
    time, lat, epoch, part = _ints(t, "time"), _ints(t, "latency_ns"), _ints(t, "epoch"), _ints(t, "partition")
    value = _ints(t, "value")
    corrupt = t.column("_corrupt_record").is_valid().to_numpy(zero_copy_only=False)
    nemesis = proc == 0
    known = type_ >= 0
    client = (proc != -2) & ~nemesis
    usable = client & ~corrupt & known & (f != -2)
    send = usable & (f == send_f)
    ok_read = (type_ == 1) & ((f == poll_f) | (f == drain_f))
    out: dict[str, Any] = {
        "nemesis_ops": int(nemesis.sum()), "unparsed_lines": int(corrupt.sum()),
        "malformed_client_ops": int((client & (~usable | (send & (value == NULL)))).sum()),
        **{f"send_{ty}": int((send & (type_ == i)).sum()) for i, ty in enumerate(OP_TYPES)},
        "poll_ok": int((usable & (f == poll_f) & (type_ == 1)).sum()),
        "drain_ok": int((usable & (f == drain_f) & (type_ == 1)).sum()),
        "malformed_records": _malformed(t, ok_read),
    }
    named = usable & ((f == send_f) | (f == drain_f)) & (part != NULL)
    out["seen"] = set(unique(part[named]).tolist())
    has_time = time != NULL
    out["tmin"] = int(time[has_time].min()) if has_time.any() else None
    out["tmax"] = int(time[has_time].max()) if has_time.any() else None
    invoked = send & has_time & (type_ == 0)
    out["send_first"] = int(time[invoked].min()) if invoked.any() else None
    out["send_last"] = int(time[invoked].max()) if invoked.any() else None
    out["ack_cs"] = unique(np.floor_divide(time[send & has_time & (type_ == 1)], NS_PER_CS))
    out["latency"] = {(fn, ty): _sample(lat[usable & (f == LINE_FS.index(fn)) & (type_ == i) & (lat != NULL)], SAMPLE)
                      for fn in LATENCY_FS for i, ty in enumerate(OP_TYPES) if i}
    # Sends by invocation epoch and by second of invocation (a completion's time minus its latency).
    s_epoch, s_code = epoch[send], type_[send].astype(np.int64)
    inv = time[send] - np.where(lat[send] == NULL, 0, lat[send])
    second = np.floor_divide(inv, NS_PER_S)
    out["per_epoch"] = _table(s_epoch, s_code)
    out["per_second"] = _table(second, s_code)
    ok = s_code == 1
    out["second_latency"] = _by_second(second[ok], lat[send][ok])
    rows = np.flatnonzero(nemesis)
    if len(rows):
        ev = t.select(["index", "time", "type", "f", "nemesis", "epoch", "detail"]).take(pa.array(rows))
        out["events"] = ev.to_pylist()
    else:
        out["events"] = []
    return out


def _malformed(t: pa.Table, ok_read: np.ndarray) -> int:
    """Records of ok polls and drains that are not three non-null integers."""
    rows = np.flatnonzero(ok_read)
    if not len(rows):
        return 0
    records = t.column("records").take(pa.array(rows)).combine_chunks()
    inner = records.flatten()
    if not len(inner):
        return 0
    lengths = pc.list_value_length(inner).to_numpy(zero_copy_only=False)
    bad = inner.is_null().to_numpy(zero_copy_only=False) | (np.nan_to_num(lengths, nan=-1) != 3)
    flat_null = inner.flatten().is_null().to_numpy(zero_copy_only=False)
    if flat_null.any():
        owner = np.repeat(np.arange(len(inner)), np.nan_to_num(lengths, nan=0).astype(np.int64))
        bad[unique(owner[flat_null])] = True
    return int(bad.sum())


def _table(key: np.ndarray, code: np.ndarray) -> dict[int, np.ndarray]:
    """key -> counts of [invoke, ok, fail, info]."""
    keep = code >= 0
    key, code = key[keep], code[keep]
    if not len(key):
        return {}
    keys, inv = np.unique(key, return_inverse=True)
    counts = np.zeros((len(keys), 4), np.int64)
    np.add.at(counts, (inv.reshape(-1), code), 1)
    return dict(zip(keys.tolist(), counts))


def _by_second(second: np.ndarray, lat: np.ndarray) -> dict[int, Sample]:
    has = lat != NULL
    second, lat = second[has], lat[has]
    order = lexsort((lat, second))
    second, lat = second[order], lat[order]
    cuts = np.flatnonzero(np.diff(second)) + 1
    out = {}
    for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(second)]])):
        if hi > lo:
            out[int(second[lo])] = _sample(lat[lo:hi], SECOND_SAMPLE)
    return out


def merge_lines(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's partial results (from every task that saw some of it) merged into one."""
    out: dict[str, Any] = {"seen": set(), "tmin": None, "tmax": None, "send_first": None, "send_last": None,
                           "latency": defaultdict(list),
                           "per_epoch": defaultdict(lambda: np.zeros(4, np.int64)),
                           "per_second": defaultdict(lambda: np.zeros(4, np.int64)),
                           "second_latency": defaultdict(list), "events": []}
    acks: list[np.ndarray] = []
    for p in parts:
        for k, v in p.items():
            if isinstance(v, int) and k not in SPAN:
                out[k] = out.get(k, 0) + v
        out["seen"] |= p["seen"]
        acks.append(p["ack_cs"])
        for k, pick in zip(SPAN, (min, max, min, max)):
            if p[k] is not None:
                out[k] = p[k] if out[k] is None else pick(out[k], p[k])
        for key, s in p["latency"].items():
            out["latency"][key].append(s)
        for name in ("per_epoch", "per_second"):
            for key, counts in p[name].items():
                out[name][key] += counts
        for key, s in p["second_latency"].items():
            out["second_latency"][key].append(s)
        out["events"] += p["events"]
    out["ack_cs"] = unique(np.concatenate(acks)) if acks else np.zeros(0, np.int64)
    out["events"].sort(key=lambda e: (e["epoch"], e["index"]))
    for e in out["events"]:
        try:
            detail = json.loads(e["detail"]) if e["detail"] else {}
        except ValueError:
            detail = {}
        e["detail"] = detail if isinstance(detail, dict) else {}
    return out
