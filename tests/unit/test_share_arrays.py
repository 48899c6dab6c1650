"""The Spark share checker's collect on arrays against the reference's `collect`: the same deliveries,
acknowledgements, leaves, final state, per-second tallies and acknowledged sends, whether a line is read by its
pattern or parsed as JSON, with asynchronous commits that leave several share-acks open."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest
from corpora.share import generate

from kchaos.checkers.share.arrays import KINDS, OUTCOMES, code, collect_arrays
from kchaos.checkers.share.reference import collect


def reference(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The reference's `collect` of `ops` in the arrays' terms: rows sorted, names coded."""
    c = collect(ops, lambda *f: tuple(f),
                lambda p, o, kind, outcome, proc, inv, done: (p, o, code(kind, KINDS), code(outcome, OUTCOMES), proc,
                                                              inv, -1 if done is None else done))
    return {"deliveries": sorted(d for rec in c.records.values() for d in rec.deliveries),
            "acks": sorted(a for rec in c.records.values() for a in rec.acks),
            "acked": sorted((v, p, -1 if o is None else o) for v, (p, o) in c.acked.items()),
            "left": dict(c.left), "state": c.state, "seconds": c.seconds}


def arrays(lines: list[bytes]) -> dict[str, Any]:
    a = collect_arrays(lines)
    return {"deliveries": sorted(map(tuple, a.deliveries.tolist())), "acks": sorted(map(tuple, a.acks.tolist())),
            "acked": sorted(map(tuple, a.acked.tolist())), "left": a.left, "state": a.state, "seconds": a.seconds}


def compact(ops: list[dict[str, Any]]) -> list[bytes]:
    """The lines as kchaos writes them: the form the patterns read."""
    return [orjson.dumps(op) for op in ops]


def spaced(ops: list[dict[str, Any]]) -> list[bytes]:
    """The same ops in a form no pattern reads: every line is parsed as JSON."""
    return [json.dumps(op).encode() for op in ops]


@pytest.mark.parametrize("seed, crashes", [(1, False), (2, True), (3, True)])
def test_the_arrays_are_the_references_collect_on_the_corpus_read_by_pattern_or_parsed(seed, crashes):
    ops = generate(seed, records=300, per_kind=2, crashes=crashes, lock_ms=2000).ops
    want = reference(ops)
    assert want["deliveries"] and want["acks"] and want["left"]
    assert arrays(compact(ops)) == want
    assert arrays(spaced(ops)) == want


def op(index: int, process: int, type_: str, f: str, **fields: Any) -> dict[str, Any]:
    return {"index": index, "time": 1_000_000_000 * index, "process": process, "type": type_, "f": f,
            "topic": "kchaos", **fields}


ASYNC = [
    op(0, 5, "invoke", "share-poll"),
    op(1, 5, "ok", "share-poll", records=[[0, 1, 7, 1], [0, 2, 8, 1], [1, 4, 9, 2]]),
    op(2, 5, "invoke", "share-ack", acks=[[0, 1, "accept"]]),
    op(3, 5, "invoke", "share-ack", acks=[[0, 2, "release"], [1, 4, "skip"]]),  # a kind no rule names
    op(4, 5, "ok", "share-ack", acks=[[0, 2, "release", "ok"], [1, 4, "skip", "fail"]]),  # the second open one's
    op(5, 5, "info", "share-ack", error="commit timed out"),  # the first's, every outcome unknown
    op(6, 5, "invoke", "share-poll"),
    op(7, 5, "ok", "share-poll", records=[]),
    op(8, 6, "invoke", "share-poll"),
    op(9, 6, "ok", "share-poll", records=[[0, 2, 8, 2]]),
    op(10, 6, "invoke", "share-ack", acks=[[0, 2, "accept"]]),
    op(11, 6, "invoke", "share-ack", acks=[[0, 2, 0]]),  # a kind that is not a name: coded as none; never completed
    op(12, 6, "fail", "share-ack", acks=[[0, 2, 0, "ok"]]),  # the oldest open one's, as it tells: outcome unknown
    op(13, 7, "invoke", "share-leave"), op(14, 7, "info", "share-leave", error="crashed"),
    op(15, 1, "invoke", "send", partition=0, value=7), op(16, 1, "ok", "send", partition=0, value=7, offset=None),
    op(17, 8, "ok", "share-state", partitions={"0": {"start": 3, "end": 3, "lag": 0}}),
]


def test_asynchronous_commits_unknown_kinds_and_open_acks_pair_as_the_reference_pairs_them():
    want = reference(ASYNC)
    assert arrays(compact(ASYNC)) == want == arrays(spaced(ASYNC))
    acks = {(a[0], a[1], a[5]): a for a in want["acks"]}
    assert acks[(0, 2, 3)][3] == OUTCOMES.index("ok") and acks[(1, 4, 3)][2:4] == (len(KINDS), 1)
    assert acks[(0, 1, 2)][3] == OUTCOMES.index("info")
    assert acks[(0, 2, 10)][2:4] == (len(KINDS), OUTCOMES.index("info")) and acks[(0, 2, 10)][6] == 12
    assert acks[(0, 2, 11)][2] == len(KINDS) and acks[(0, 2, 11)][6] == -1


def test_a_cut_off_last_line_is_skipped_and_an_odd_array_is_parsed_as_json():
    lines = compact(ASYNC[:2]) + [b'{"index":2,"time":2,"process":5,"type":"invoke","f":"share-ack","topic":"k']
    assert arrays(lines) == reference(ASYNC[:2])
    odd = ASYNC[0:1] + [op(1, 5, "ok", "share-poll", records=[[0, 1, 7, 1]], member="m-1")]
    got = collect_arrays(compact(odd))
    assert got.deliveries.tolist() == [[0, 1, 7, 1, 5, 0, 1, 0, 0, 1_000_000_000]]
    assert np.array_equal(got.acks, np.zeros((0, 7), np.int64))


def test_a_route_task_keeps_the_acknowledged_sends_to_itself_and_routes_every_other_line(tmp_path):
    from kchaos.checkers.share.tasks import route_task

    lines = [b'{"index":0,"time":1,"process":3,"type":"invoke","f":"send","topic":"t","partition":1,"value":7}',
             b'{"index":1,"time":2,"process":3,"type":"ok","f":"send","topic":"t","partition":1,"value":7,'
             b'"producer":3,"offset":42}',
             b'{"index":2,"time":3,"process":4,"type":"invoke","f":"share-poll"}',
             b'{"index":3,"time":4,"process":5,"type":"invoke","f":"share-poll"}']
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"\n".join(lines) + b"\n")
    acked = route_task((str(history), 0, 0, history.stat().st_size, str(tmp_path), 2))
    assert acked.tolist() == [[7, 1, 42]]
    assert (tmp_path / "r0000.b0").read_bytes() == lines[2]
    assert (tmp_path / "r0000.b1").read_bytes() == lines[3]
