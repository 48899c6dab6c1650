"""The share corpus (tests/corpora/share.py) against the share checker's reference: every planted anomaly found, at
exactly its records, nothing else found, and the allowed redeliveries counted by the causes the corpus labels."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from corpora.share import KINDS, generate, write, write_large

from kchaos.checkers.history_scan import read_ops
from kchaos.checkers.share.reference import CAUSES, MAX_EXAMPLES, check_share_ops


def _assert_labels(result: dict[str, Any], planted: dict[str, set[tuple[int, int, int]]],
                   causes: dict[str, int]) -> None:
    assert set(planted) == set(KINDS)
    for kind in KINDS:
        assert len(planted[kind]) <= MAX_EXAMPLES
        assert {tuple(e) for e in result["examples"].get(kind, [])} == planted[kind], kind
        assert result["counts"][kind] == len(planted[kind]), kind
    assert result["redeliveries"] == causes
    assert result["counts"]["unseen"] == 0
    assert result["valid"] is (not any(planted.values()))


def _options(test: dict[str, Any]) -> tuple[int, int]:
    options = test["workload"]["options"]
    return options["delivery_limit"], options["lock_ms"]


@pytest.mark.parametrize("crashes", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_reference_finds_exactly_the_plants(seed: int, crashes: bool) -> None:
    corpus = generate(seed, records=600, crashes=crashes)
    result = check_share_ops(corpus.ops, *_options(corpus.test))
    _assert_labels(result, corpus.planted, corpus.causes)
    assert all(len(corpus.planted[k]) == 2 for k in KINDS if k != "share_lost")
    assert len(corpus.planted["share_lost"]) == (0 if crashes else 2)
    crashed = any(op["f"] == "share-leave" and op["type"] == "info" for op in corpus.ops)
    assert crashed is crashes
    assert corpus.causes["release"] and corpus.causes["failed_accept"] and corpus.causes["lock_timeout"]
    assert bool(corpus.causes["crash"]) is crashes


@pytest.mark.parametrize("seed, kwargs", [
    (5, {"partitions": 1, "members": 2, "limit": 2, "lock_ms": 50, "per_kind": 3}),
    (6, {"partitions": 4, "producers": 3, "members": 4, "limit": 3, "lock_ms": 300, "crashes": True}),
    (7, {"lock_ms": 200, "per_kind": 10}),
    (8, {"per_kind": 0, "crashes": True}),
])
def test_shapes(seed: int, kwargs: dict[str, Any]) -> None:
    """Other shapes: one partition, a short lock (locks run out during the main phase), the most plants the
    reference lists, no plants at all."""
    corpus = generate(seed, records=2000, **kwargs)
    _assert_labels(check_share_ops(corpus.ops, *_options(corpus.test)), corpus.planted, corpus.causes)


def test_history_is_well_formed() -> None:
    corpus = generate(9, records=500, crashes=True)
    ops = corpus.ops
    assert [op["index"] for op in ops] == list(range(len(ops)))
    assert all(a["time"] <= b["time"] for a, b in zip(ops, ops[1:]))
    outstanding: dict[int, str] = {}
    for op in ops:
        if op["type"] == "invoke":
            assert op["process"] not in outstanding, op
            outstanding[op["process"]] = op["f"]
        else:
            assert outstanding.pop(op["process"]) == op["f"], op
    assert not outstanding
    producers, members = corpus.test["workload"]["producers"], corpus.test["workload"]["consumers"]
    assert {op["process"] for op in ops if op["f"] == "send"} <= set(range(producers))
    offsets: dict[int, list[int]] = {}
    for op in ops:
        if op["f"] == "send" and op["type"] == "ok":
            offsets.setdefault(op["partition"], []).append(op["offset"])
    assert all(o == list(range(len(o))) for o in offsets.values())
    state = [op for op in ops if op["f"] == "share-state"]
    assert state[-1] is ops[-1] and state[-1]["process"] == producers + members
    assert all(s["lag"] == 0 and s["end"] == len(offsets.get(int(p), [])) for p, s in ops[-1]["partitions"].items())
    assert generate(9, records=500, crashes=True) == corpus  # deterministic by seed


def test_write_round_trips(tmp_path: Path) -> None:
    corpus = generate(10, records=300)
    history = write(corpus, tmp_path / "run")
    assert history == tmp_path / "run" / "history.jsonl"
    assert json.loads((tmp_path / "run" / "test.json").read_text())["workload"]["kind"] == "share"
    assert list(read_ops(history)) == corpus.ops


def test_plants_need_two_members_and_a_limit_of_two() -> None:
    with pytest.raises(ValueError):
        generate(1, records=10, members=1)
    with pytest.raises(ValueError):
        generate(1, records=10, limit=1)
    generate(1, records=10, members=1, limit=1, per_kind=0)


def test_write_large_streams_a_labelled_history(tmp_path: Path) -> None:
    labels = write_large(tmp_path, 11, 20_000, crashes=False)
    assert json.loads((tmp_path / "labels.json").read_text()) == labels
    test = json.loads((tmp_path / "test.json").read_text())
    result = check_share_ops(read_ops(tmp_path / "history.jsonl"), *_options(test))
    planted = {k: {tuple(e) for e in v} for k, v in labels["planted"].items()}
    _assert_labels(result, planted, labels["causes"])
    assert all(len(planted[k]) == 10 for k in KINDS)
    assert abs(labels["deliveries"] - 20_000) < 200
    assert sum(1 for _ in open(tmp_path / "history.jsonl", "rb")) == labels["lines"]
    assert set(labels["causes"]) == set(CAUSES)
