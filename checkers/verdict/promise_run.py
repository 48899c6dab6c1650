"""A checked run's lost writes judged against Kafka's guarantee (`promise.verdict`): the run directory read.

`loss_section` reads what `verdict` needs from the run: the configuration's
Promise (test.json), the ISR per partition (the KRaft metadata log decoded into
evidence/metadata.jsonl, exact; else isr.jsonl, sampled each second), the
fencings, the power failures with what each dropped (lazyfs's per-file
report on the nemesis lines, placed on the history clock by test.json's
history start), unclean elections, and each lost write's partition and ack
time (the history's Parquet form).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from kchaos.checkers.verdict.promise import NS, Events, IsrSample, PowerLoss, UncleanElection, classify
from kchaos.core.promise import Promise
from kchaos.evidence.files import EVIDENCE_DIR, HISTORY_START_KEY, ISR_FILE, read_jsonl
from kchaos.evidence.files import METADATA_FILE as METADATA_NAME
from kchaos.evidence.power_loss import dropped_since

# run-relative; written by kchaos.evidence.decode from the KRaft metadata log
METADATA_FILE = f"{EVIDENCE_DIR}/{METADATA_NAME}"


def node_id(name: Any) -> int | None:
    """Broker id of a node name: nodes are n<id>, as the KRaft cluster names them."""
    m = re.fullmatch(r"n(\d+)", str(name))
    return int(m.group(1)) if m else None


def _samples(path: Path, parse: Callable[[dict[str, Any]], IsrSample | None]) -> dict[int, list[IsrSample]]:
    """The lines of a JSONL file that `parse` makes samples of, per partition in time order; lines it cannot
    read (errors, a truncated last line) are skipped; {} if the file is absent."""
    out: dict[int, list[IsrSample]] = {}
    for d in read_jsonl(path):
        try:
            s = parse(d)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if s is not None:
            out.setdefault(s.partition, []).append(s)
    for v in out.values():
        v.sort(key=lambda s: s.time)
    return out


def _ids(xs: Iterable[Any]) -> frozenset[int]:
    return frozenset(int(i) for i in xs)


def read_isr_samples(path: Path) -> dict[int, list[IsrSample]]:
    """isr.jsonl (the run's ISR monitor, once a second) as samples per partition, in time order."""
    return _samples(path, lambda d: IsrSample(int(d["time"]), int(d["partition"]), int(d.get("leader", -1)),
                                              _ids(d["isr"])))


def read_metadata_samples(path: Path, topic: str) -> dict[int, list[IsrSample]]:
    """The KRaft metadata log's partition states of `topic` (evidence/metadata.jsonl, decoded by Kafka's
    own tool; times on the history clock) as samples per partition; {} if absent or without times."""
    def parse(d: dict[str, Any]) -> IsrSample | None:
        if d.get("type") != "partition" or d.get("topic") != topic or d.get("time_s") is None:
            return None
        elr = d.get("elr")
        return IsrSample(round(float(d["time_s"]) * NS), int(d["partition"]), int(d["leader"]), _ids(d["isr"]),
                         None if elr is None else _ids(elr))

    return _samples(path, parse)


def read_fenced(path: Path) -> frozenset[tuple[int, int]]:
    """(broker, history ns) of every fencing in evidence/metadata.jsonl, on the same clock as its partition
    states (the records of one controller batch share a time); empty if absent."""
    out = set()
    for d in read_jsonl(path):
        if d.get("type") == "broker" and d.get("kind") == "fenced" and d.get("time_s") is not None:
            try:
                out.add((int(d["broker"]), round(float(d["time_s"]) * NS)))
            except (KeyError, TypeError, ValueError):
                continue
    return frozenset(out)


def controller_unclean_elections(path: Path, topic: str, operator: Iterable[UncleanElection] = (),
                                 within_ns: int = 10 * NS) -> list[UncleanElection]:
    """The unclean elections the controller made on its own, from evidence/metadata.jsonl: a partition
    state of `topic` whose leader recovery state turns RECOVERING (Kafka marks every unclean election so),
    except those within `within_ns` of an operator's election of the same partition (`operator`)."""
    ops = [(u.partition, u.time) for u in operator]
    out: list[UncleanElection] = []
    was: dict[int, bool] = {}
    for d in read_jsonl(path):
        try:
            if d.get("type") != "partition" or d.get("topic") != topic or d.get("time_s") is None:
                continue
            p, t, recovering = int(d["partition"]), round(float(d["time_s"]) * NS), bool(d.get("recovering"))
            if recovering and not was.get(p) and not any(q == p and abs(u - t) <= within_ns for q, u in ops):
                out.append(UncleanElection(t, p, int(d["leader"]), by_controller=True))
        except (KeyError, TypeError, ValueError):
            continue
        was[p] = recovering
    return sorted(out, key=lambda u: u.time)


def nemesis_events(lines: Iterable[Mapping[str, Any]], topic: str = "kchaos",
                   start_unix_ms: float | None = None) -> tuple[list[PowerLoss], list[UncleanElection]]:
    """Power losses (a replaced disk among them: everything lost) and unclean elections from completed (ok) nemesis
    lines of a history (`topic`'s logs and the run's clock place what each power failure dropped:
    `dropped_since`)."""
    power, unclean = [], []
    for d in lines:
        if d.get("process") != "nemesis" or d.get("type") != "ok":
            continue
        if d.get("f") == "power-fail":
            nodes = d.get("nodes") or d.get("targets") or []
            lost = raw if isinstance(raw := d.get("lost"), dict) else {}
            dropped: set[int] = set()
            oldest: dict[int, dict[int, int]] = {}
            for n in nodes:
                loss, i = lost.get(n), node_id(n)
                if i is None:
                    continue
                # a node whose failure dropped no unsynced bytes kept everything (its log was fsynced)
                if isinstance(loss, dict) and loss.get("unsynced_bytes") == 0:
                    continue
                dropped.add(i)
                since = dropped_since(loss, topic, int(d["time"]), start_unix_ms) if isinstance(loss, dict) else None
                if since is not None:
                    oldest[i] = since
            power.append(PowerLoss(int(d["time"]), frozenset(dropped), oldest))
        elif d.get("f") == "wipe":
            wiped = {i for n in d.get("wiped") or {} if (i := node_id(n)) is not None}
            power.append(PowerLoss(int(d["time"]), frozenset(wiped), {}, what="had its disk replaced"))
        elif d.get("f") == "elect-unclean" and d.get("partition") is not None:
            unclean.append(UncleanElection(int(d["time"]), int(d["partition"])))
    return sorted(power, key=lambda p: p.time), sorted(unclean, key=lambda u: u.time)


def _rows(parquet: Path, values: list[Any]) -> tuple[dict[Any, tuple[int, int]], list[dict[str, Any]]]:
    """From a history's Parquet form: (partition, ack ns) of the acked sends of `values`, and the ok nemesis
    lines with their detail fields spread out."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(parquet, columns=["time", "process", "type", "f", "partition", "value", "detail"])
    ok = pc.equal(t["type"], "ok")
    sends = t.filter(pc.and_(pc.and_(ok, pc.equal(t["f"], "send")),
                             pc.is_in(t["value"], value_set=pa_array(values, t.schema.field("value").type))))
    acks = {v: (p, ts) for v, p, ts in zip(sends["value"].to_pylist(), sends["partition"].to_pylist(),
                                           sends["time"].to_pylist())}
    nem = t.filter(pc.and_(ok, pc.equal(t["process"], "nemesis"))).to_pylist()
    lines = [{**json.loads(d.pop("detail") or "{}"), **{k: v for k, v in d.items() if v is not None}} for d in nem]
    return acks, lines


def pa_array(values: list[Any], type_: Any) -> Any:
    """`values` as an Arrow array of the history's value type (values that do not fit are dropped)."""
    import pyarrow as pa

    try:
        return pa.array(values, type=type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([], type=type_)


def loss_section(run: Path, parquet: Path, test: Mapping[str, Any], results: Mapping[str, Any]) -> dict[str, Any]:
    """`classify` for a checked run: lost writes from results' timeline, their partitions and ack times and
    the faults from the history's Parquet form, ISR samples from the run's isr.jsonl."""
    total = int((results.get("counts") or {}).get("lost") or 0)
    listed = [a["key"] for a in ((results.get("timeline") or {}).get("anomalies") or {}).get("lost") or []]
    promise = Promise.of(test)
    if not total or not promise.no_loss or not Path(parquet).exists():
        return {**classify([], Events(), promise, total), "isr_source": None}
    acks, lines = _rows(Path(parquet), listed)
    topic = str((test.get("topic") or {}).get("name") or "kchaos")
    start = test.get(HISTORY_START_KEY)
    power, unclean = nemesis_events(lines, topic, float(start) if isinstance(start, (int, float)) else None)
    exact = read_metadata_samples(Path(run) / METADATA_FILE, topic)
    unclean += controller_unclean_elections(Path(run) / METADATA_FILE, topic, unclean)
    ev = Events(isr=exact or read_isr_samples(Path(run) / ISR_FILE), power=power, unclean=unclean,
                fenced=read_fenced(Path(run) / METADATA_FILE))
    out = classify([(v, *acks.get(v, (None, None))) for v in listed], ev, promise, total)
    return {**out, "isr_source": METADATA_FILE if exact else ISR_FILE}
