"""The corpus's last two phases (tests/corpora/sim.py): the tail, sends after the consumers stopped, and the
final read of every partition.

Read-bound losses and unseen values are planted in the tail: they must be read by the final read alone. A
read-bound loss is an acked send whose offset the drain leaves out with a later send after it, so only the read
bound sees it lost; an unseen value is an acked send past the part of an incomplete partition the drain reads.
The drain reads each partition in batches; an incomplete partition's drain stops before its unseen part and ends
`info`.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

TAIL_PLANTS = ("lost_read_bound", "unseen")


def tail_phase(sim: Any) -> Iterator[dict[str, Any]]:
    """The tail of `sim` (a corpus_sim.Simulation after its main and group phases, idle): sends after the consumers
    stopped, read-bound losses, then (unseen where incomplete) a few more; labelled in `sim.labels`."""
    rng = sim.rng
    targets = sorted(sim.incomplete & set(range(sim.active)))
    plants: dict[int, list[str]] = {p: [] for p in range(sim.active)}
    for kind in TAIL_PLANTS:
        for _ in range(sim.plant[kind]):
            plants[rng.choice(targets)].append(kind)
    for p in range(sim.active):
        for _ in range(plants[p].count("lost_read_bound")):
            x = sim._ready_producer()
            o = len(sim.logs[p])
            sim.labels["lost"].add(sim._send_appended(x, p))
            sim._send_appended(x, p)
            sim.omit.add((p, o))
        sim.drain_end[p] = len(sim.logs[p])
        for _ in range(rng.randint(0, 2)):
            x = sim._ready_producer()
            v = sim._invoke_send(x, p)
            acked = sim.pending[x][2] == "ok"
            sim._complete_send(x)
            if acked and p in sim.incomplete:
                sim.labels["unseen"].add(v)
        for _ in range(plants[p].count("unseen")):
            sim.labels["unseen"].add(sim._send_appended(sim._ready_producer(), p))
        yield from sim._flush()


def drain_phase(sim: Any, topic: str) -> Iterator[dict[str, Any]]:
    """The final read of every partition of `topic` in `sim` (after its tail), by process producers + consumers:
    complete where the partition is not in `sim.incomplete`, else up to its tail's unseen part, then an `info`
    drain."""
    proc = sim.producers + sim.consumers
    for p in range(sim.total):
        log, high = sim.logs[p], len(sim.logs[p])
        complete = p not in sim.incomplete
        end = high if complete else sim.drain_end.get(p, 0)
        records = [[p, o, log[o]] for o in range(end) if (p, o) not in sim.omit]
        size = sim.rng.randint(100, 1000)
        batches = [records[i:i + size] for i in range(0, len(records), size)]
        if complete and not batches:
            batches = [[]]
        for i, batch in enumerate(batches):
            sim._emit(proc, "invoke", "drain", topic=topic, partition=p)
            sim._emit(proc, "ok", "drain", topic=topic, partition=p, records=batch,
                      complete=complete and i == len(batches) - 1, high_watermark=high)
            yield from sim._flush()
        if not complete:
            sim._emit(proc, "invoke", "drain", topic=topic, partition=p)
            sim._emit(proc, "info", "drain", topic=topic, partition=p, complete=False,
                      error="no progress before the drain deadline")
            yield from sim._flush()
