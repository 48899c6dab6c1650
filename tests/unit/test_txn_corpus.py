"""The labelled txn corpus (tests/corpora/txn.py) against the reference checker: every planted anomaly is found,
exactly, under either isolation level, and nothing else is."""
from __future__ import annotations

import pytest
from corpora.txn import LABEL, PLANTS, UNLABELLED, generate
from hypothesis import given, settings
from hypothesis import strategies as st
from test_txn_checker import found

from kchaos.checkers.txn.history import parse_ops
from kchaos.checkers.txn.reference import COUNTS, check_txn


@st.composite
def shapes(draw: st.DrawFn) -> dict:
    """A corpus's arguments: a small base and a few plants of random kinds."""
    isolation = draw(st.sampled_from(["read_committed", "read_uncommitted"]))
    kinds = [k for k in PLANTS if not (k == "aborted_read" and isolation == "read_committed")]
    return {"seed": draw(st.integers(0, 2**32)), "txns": draw(st.integers(0, 40)),
            "partitions": draw(st.integers(1, 4)), "processes": draw(st.integers(1, 4)), "isolation": isolation,
            "plant": draw(st.dictionaries(st.sampled_from(kinds), st.integers(0, 3), max_size=6)),
            "cut_off": draw(st.booleans())}


def labels(corpus) -> dict[str, int]:
    return {k: len(corpus.planted.get(k, ())) for k in COUNTS}


@settings(max_examples=150, deadline=None)
@given(shapes())
def test_the_reference_finds_exactly_the_labels(shape):
    corpus = generate(**shape)
    r = check_txn(parse_ops(enumerate(corpus.ops, 1)), corpus.test, max_examples=None)
    assert r["counts"] == labels(corpus)
    for kind, keys in corpus.planted.items():
        if kind not in ("G0", "G1c", "G1c_wr") and keys:
            assert r["examples"][kind] == sorted(list(k) if isinstance(k, tuple) else k for k in keys)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_every_kind_at_once(isolation):
    plant = {k: 2 for k in PLANTS if not (k == "aborted_read" and isolation == "read_committed")}
    corpus = generate(7, txns=60, isolation=isolation, plant=plant, cut_off=True)
    r = check_txn(parse_ops(enumerate(corpus.ops, 1)), corpus.test)
    assert r["counts"] == labels(corpus)
    # the base adds read_uncommitted reads; two plants cause lost_write, two torn_transaction
    assert all(r["counts"][LABEL.get(k, k)] >= 2 for k in plant if k not in UNLABELLED)
    assert [set(r["cycles"][k]["ops"]) for k in ("G0", "G1c")] == \
        [set(min(corpus.planted[k])) for k in ("G0", "G1c")]


def test_an_unknown_plant_or_an_aborted_read_under_read_committed_is_refused():
    with pytest.raises(ValueError, match="unknown plant"):
        generate(0, plant={"lost": 1})
    with pytest.raises(ValueError, match="read_uncommitted"):
        generate(0, plant={"aborted_read": 1})


def test_every_send_lies_in_its_keys_partition_of_the_topic_test_json_records():
    corpus = generate(5, txns=60, partitions=3, plant=dict.fromkeys(LABEL, 2) | {"G0": 1}, cut_off=True)
    n = corpus.test["topic"]["partitions"]
    sends = [m for op in corpus.ops if op.get("f") == "txn" and op["type"] != "invoke" for m in op["value"]
             if m[0] == "send"]
    assert len(sends) > 20 and all(k % n == p for _, k, _, p, _ in sends)
    assert any(k >= n for _, k, _, _, _ in sends)  # the base's keys reach past the topic's partition count
    r = check_txn(parse_ops(enumerate(corpus.ops, 1)), corpus.test)
    assert found(r) == {"lost_write": 2, "torn_transaction": 2, "G0": 1}
