"""The Spark txn checker (checkers/txn/check.py) against the reference (checkers/txn/reference.py) and the labelled
corpus (tests/corpora/txn.py): the same result, dict for dict, on random histories with aborts, info outcomes,
cut-off transactions, duplicates, skips and planted cycles, parsed in one stretch or many; the same error for a
malformed line; the same on each tiny history of test_txn_definitions.py; and `kchaos check` on a txn run uses it.
Every example is a full Spark check, hence few."""
from __future__ import annotations

import json

import pytest
from corpora.txn import PLANTS, generate, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_txn_corpus import labels, shapes
from test_txn_definitions import CASES, found

from kchaos.checkers import CheckInputError, check_path
from kchaos.checkers.spark import spark_context
from kchaos.checkers.txn.check import TXN, TxnSparkChecker, check_txn_spark
from kchaos.checkers.txn.reference import COUNTS, TxnChecker, check_txn_file
from kchaos.core.workload_kind import kind_of

pytestmark = pytest.mark.spark

MASTER = "local[2]"


@pytest.fixture(scope="module")
def sc():
    """The process-wide SparkContext (test_checker.py's session fixture stops it at the end)."""
    return spark_context(MASTER)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes(), st.sampled_from([1 << 20, 300]))
def test_spark_equals_the_reference_and_the_labels(sc, tmp_path_factory, shape, stretch):
    corpus = generate(**shape)
    history = write(corpus, tmp_path_factory.mktemp("txn"))
    ref = check_txn_file(history, corpus.test)
    assert check_txn_spark(sc, history, corpus.test, stretch_bytes=stretch) == ref
    assert ref["counts"] == labels(corpus)


def test_every_kind_at_once_in_many_stretches(sc, tmp_path):
    plant = dict.fromkeys(PLANTS, 3)
    corpus = generate(11, txns=80, isolation="read_uncommitted", plant=plant, cut_off=True)
    history = write(corpus, tmp_path / "all")
    ref = check_txn_file(history, corpus.test)
    assert all(ref["counts"][k] >= 3 for k in COUNTS)
    assert check_txn_spark(sc, history, corpus.test, stretch_bytes=500) == ref
    assert not (tmp_path / "all" / "history.txn").exists()


@pytest.mark.parametrize("line, needle", [
    ('{"process": 0, "type": "ok", "f": "txn", "value": []}', "ok txn of process 0 completes no invocation"),
    ('{"process": 1, "type": "invoke", "f": "txn", "value": [["send", "k", 1]]}', "txn invoke value"),
    ("not json", "not JSON"),
])
def test_a_malformed_line_is_the_same_error(sc, tmp_path, line, needle):
    corpus = generate(3, txns=30)
    history = write(corpus, tmp_path / "bad")
    lines = history.read_text().splitlines()
    at = len(lines) // 2
    lines.insert(at, line)
    history.write_text("\n".join(lines) + "\n")
    with pytest.raises(CheckInputError) as ref:
        check_txn_file(history, corpus.test)
    for stretch in (1 << 20, 200):
        with pytest.raises(CheckInputError) as spark:
            check_txn_spark(sc, history, corpus.test, stretch_bytes=stretch)
        assert str(spark.value) == str(ref.value) and f":{at + 1}: " in str(ref.value) and needle in str(ref.value)


def test_a_completion_whose_invocation_is_in_an_earlier_stretch_must_mirror_it(sc, tmp_path):
    ops = [{"process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 1]]}] + \
          [{"process": "nemesis", "type": "info", "f": "kill", "pad": "x" * 300}] + \
          [{"process": 0, "type": "ok", "f": "txn", "value": [["send", 0, 2, 0, 0]]}]
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(op) + "\n" for op in ops))
    with pytest.raises(CheckInputError, match=r"history.jsonl:3: completed send"):
        check_txn_spark(sc, history, {}, stretch_bytes=100)


def test_kchaos_check_uses_spark_for_a_txn_run_and_keeps_the_reference(sc, tmp_path):
    assert kind_of(TXN).checkers() == {TXN: TxnSparkChecker}
    corpus = generate(5, txns=20, plant={"G1c": 1, "poll_skip": 1})
    history = write(corpus, tmp_path / "run")
    r = check_path(history.parent, MASTER)
    assert (r["verdict"], r["failed"], r["allowed"]) == ("fail", {"poll_skip": 1}, {"G1c": 1})
    assert r["cycles"]["G1c"]["ops"] == sorted(min(corpus.planted["G1c"]), reverse=True)
    assert {k: v for k, v in TxnChecker().check(corpus.test, history).items()} == r["checkers"][TXN]


@pytest.mark.parametrize("name", CASES)
def test_spark_follows_each_definition_as_the_reference_does(sc, tmp_path, name):
    h, test, counts, _ = CASES[name]()
    run = h.write(tmp_path / "run", test)
    ref = check_txn_file(run / "history.jsonl", test)
    assert found(ref) == counts
    # in stretches of a few lines: completions meet their invocations, and cut-off ones are found, across them
    assert check_txn_spark(sc, run / "history.jsonl", test, stretch_bytes=200) == ref


def subscribe_mode_history(revoked: bool):
    """Process 1 polls partition 0 at offset 0, then at 2 (a skip over offset 1), as subscribe mode records it:
    with `revoked`, partition 0 is revoked (generation 3) and assigned again (generation 5) between the two, with
    a crash and sub-p ops around; without, only partition 1 moves, so the polls share one generation of 0."""
    from test_txn_checker import H
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(0, "ok", sends=[(0, 11, 0, 1)])
         .txn(0, "ok", sends=[(0, 12, 0, 2)]).txn(1, "ok", polls=[[[0, 0, 10]]]))
    moved = [0, 1] if revoked else [1]
    h.add(process=1, type="ok", f="rebalance", revoked=moved, assigned=[], generation=3)
    h.add(process=1, type="info", f="crash", restart_after=2.0, error="crashed (crash-client)")
    for f, value in (("assign", [1]), ("subscribe", "kchaos")):
        h.add(process=1, type="invoke", f=f, value=value).add(process=1, type="ok", f=f, value=value)
    h.add(process=1, type="ok", f="rebalance", revoked=[], assigned=moved, generation=5)
    return h.txn(1, "ok", polls=[[[0, 2, 12]]]).drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])


@pytest.mark.parametrize("revoked, counts", [(True, {}), (False, {"poll_skip": 1})])
def test_a_poll_skip_across_a_revocation_is_allowed_and_inside_a_generation_is_not(sc, tmp_path, revoked, counts):
    from test_txn_checker import RC
    run = subscribe_mode_history(revoked).write(tmp_path / "sub", RC)
    ref = check_txn_file(run / "history.jsonl", RC)
    assert found(ref) == counts
    for stretch in (1 << 20, 200):
        assert check_txn_spark(sc, run / "history.jsonl", RC, stretch_bytes=stretch) == ref
