"""The corpus's consumer group phase (tests/corpora/sim.py): members consume, the group commits.

Run after the main phase when committed_unconsumed or double_consumed is planted. Two member processes
(after the drainer) consume one active partition `p` from offset 0 to its end L, in pieces; each piece is
an `assign` op with a fresh generation, then one poll of the piece carrying that generation, so no piece
shares a stream or a generation with another. The pieces leave out one offset per planted
committed_unconsumed (never an offset the drain omits, so the final read returns it), and the drainer
then records the group's committed offset L for `p`: each left-out offset is below it, drained, and
polled by no member. Each planted double_consumed is an offset of a piece returned once more, in its
piece's generation, by the other member (after an assign of that generation, so its stream starts there).
Fresh acked sends to `p` come first, so there are always enough offsets.
"""
from __future__ import annotations

from typing import Any

GROUP_PLANTS = ("committed_unconsumed", "double_consumed")


def group_phase(sim: Any) -> None:
    """Emit the group phase into `sim` (a corpus_sim.Simulation, idle: nothing outstanding) and label it."""
    rng = sim.rng
    holes_n, doubles_n = sim.plant["committed_unconsumed"], sim.plant["double_consumed"]
    p = rng.randrange(sim.active)
    for _ in range(holes_n + doubles_n + 2):
        sim._send_appended(sim._ready_producer(), p)
    log = sim.logs[p]
    end = len(log)
    free = [o for o in range(end) if (p, o) not in sim.omit]
    picked = rng.sample(free, holes_n + doubles_n)
    holes, doubles = set(picked[:holes_n]), picked[holes_n:]
    members = (sim.producers + sim.consumers + 1, sim.producers + sim.consumers + 2)
    pieces: list[list[int]] = []
    piece: list[int] = []
    for o in range(end):
        if o in holes:
            if piece:
                pieces.append(piece)
            piece = []
            continue
        piece.append(o)
        if rng.random() < 0.2:
            pieces.append(piece)
            piece = []
    if piece:
        pieces.append(piece)
    generation_of: dict[int, int] = {}
    for i, offsets in enumerate(pieces):
        gen = sim.generation = getattr(sim, "generation", 0) + 1
        member = members[i % 2]
        _assign(sim, member, p, gen)
        _poll(sim, member, [[p, o, log[o]] for o in offsets], gen)
        generation_of.update(dict.fromkeys(offsets, gen))
    for o in doubles:
        gen = generation_of[o]
        other = members[1] if pieces.index(next(x for x in pieces if o in x)) % 2 == 0 else members[0]
        _assign(sim, other, p, gen)
        _poll(sim, other, [[p, o, log[o]]], gen)
    drainer = sim.producers + sim.consumers
    sim._emit(drainer, "invoke", "committed", topic="kchaos", partition=p)
    sim._emit(drainer, "ok", "committed", topic="kchaos", partition=p, offset=end)
    sim.labels["committed_unconsumed"] |= {(p, o) for o in holes}
    sim.labels["double_consumed"] |= {(p, o) for o in doubles}


def _assign(sim: Any, member: int, p: int, gen: int) -> None:
    fields: dict[str, Any] = {"topic": "kchaos", "partitions": [p], "generation": gen}
    sim._emit(member, "invoke", "assign", **fields)
    sim._emit(member, "ok", "assign", **fields)


def _poll(sim: Any, member: int, records: list[list[int]], gen: int) -> None:
    sim._emit(member, "invoke", "poll", topic="kchaos")
    sim._emit(member, "ok", "poll", topic="kchaos", records=records, generation=gen)
