"""The Spark queue checker against the labelled corpus and the reference checker.

Every example is a full Spark check (a few seconds on a loaded 2-core machine), hence few
hypothesis examples; tests/unit/test_corpus.py checks the reference on many more shapes.
"""
from __future__ import annotations

from typing import Any

import pytest
from corpora.queue import ANOMALIES, PLANTS, generate, write
from histories import drop_impossible_loss, hostable_plants, run_shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers.queue.check import QueueChecker
from kchaos.checkers.queue.reference import COUNTS, MAX_EXAMPLES, check_reference
from kchaos.checkers.spark import spark_session

pytestmark = pytest.mark.spark

MASTER = "local[2]"
COMPARED = ("valid", "counts", "examples", "loss")


@pytest.fixture(scope="module")
def spark():
    """The process-wide SparkSession (test_checker.py's session fixture stops it at the end)."""
    return spark_session(MASTER)


def spark_check(corpus, tmp_path_factory) -> dict[str, Any]:
    run = write(corpus, tmp_path_factory.mktemp("corpus"))
    return QueueChecker(master=MASTER).check(corpus.test, run / "history.jsonl")


def assert_agrees_with_reference(r: dict[str, Any], corpus) -> dict[str, Any]:
    ref = check_reference(corpus.ops, corpus.test)
    assert {k: r[k] for k in COMPARED} == {k: ref[k] for k in COMPARED}
    assert {k: v for k, v in r["stats"].items() if k != "unparsed_lines"} == ref["stats"]
    return ref


def assert_finds_the_labels(r: dict[str, Any], corpus) -> None:
    acked = {o["value"] for o in corpus.ops if o["f"] == "send" and o["type"] == "ok"}
    assert r["counts"] == {**{k: len(corpus.planted[k]) for k in ANOMALIES}, "acked": len(acked)}
    for kind in ANOMALIES:
        keys = sorted(corpus.planted[kind])[:MAX_EXAMPLES]
        assert r["examples"].get(kind, []) == [list(k) if isinstance(k, tuple) else k
                                               for k in keys], kind


@st.composite
def shapes(draw: st.DrawFn, planting: bool = True) -> dict[str, Any]:
    """generate() arguments: a small run shape with plants (of every kind it can host)."""
    kw = draw(run_shapes(sends=150, partitions=3, producers=3, consumers=2, empty_partitions=1,
                         idempotence=True))
    allowed = hostable_plants(kw, planting)
    # Mostly every hostable kind at once, so few examples still cover them all.
    plant = {k: draw(st.integers(1, 12 if k == "lost" else 3)) for k in sorted(allowed)}
    return {**kw, "plant": drop_impossible_loss(kw, plant)}


@settings(max_examples=5, deadline=None, database=None)
@given(shape=shapes())
def test_spark_finds_exactly_the_planted_anomalies(spark, tmp_path_factory, shape):
    c = generate(**shape)
    r = spark_check(c, tmp_path_factory)
    assert_agrees_with_reference(r, c)
    assert_finds_the_labels(r, c)


@settings(max_examples=2, deadline=None, database=None)
@given(shape=shapes(planting=False))
def test_spark_on_clean_histories_finds_what_the_reference_finds(spark, tmp_path_factory, shape):
    c = generate(**shape)
    r = spark_check(c, tmp_path_factory)
    assert_agrees_with_reference(r, c)
    assert_finds_the_labels(r, c)
    assert r["valid"] == ("unknown" if c.planted["unseen"] else True)


def test_every_kind_at_once_with_more_than_ten_keys(spark, tmp_path_factory):
    """Every kind planted, lost more than MAX_EXAMPLES times: counts, examples and verdict agree."""
    c = generate(11, sends=400, partitions=3, producers=3, consumers=2, empty_partitions=1,
                 plant={**dict.fromkeys(PLANTS, 3), "lost": 12}, idempotent=True)
    r = spark_check(c, tmp_path_factory)
    assert all(r["counts"][k] for k in COUNTS)
    assert r["counts"]["lost"] > MAX_EXAMPLES
    assert_agrees_with_reference(r, c)
    assert_finds_the_labels(r, c)
    assert r["valid"] is False
    assert r["loss"] == {"acks": "all", "promised": True, "expected_by_configuration": False}
