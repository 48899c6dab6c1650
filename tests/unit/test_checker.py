"""Unit tests for checkers/: one handmade history per anomaly, plus input handling.

All Spark work shares one local SparkSession (started once per test session).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from histories import SEND, HistoryBuilder, add_random_sends, idempotent_test
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers import CheckInputError, check_path, check_runs, exit_code, merge_valid, run_checkers
from kchaos.checkers.queue.check import COUNTS, QueueChecker
from kchaos.checkers.queue.reference import check_reference
from kchaos.checkers.spark import spark_session
from kchaos.checkers.verdict.observed import observe

MASTER = "local[2]"
ZERO = {k: 0 for k in COUNTS}


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test session."""
    session = spark_session(MASTER)
    yield session
    session.stop()


@pytest.fixture
def check(spark, tmp_path):
    """check(builder, test=None, tail="") -> results of check_path on a fresh run directory."""
    def run(h: HistoryBuilder, test: dict[str, Any] | None = None, tail: str = "") -> dict:
        run_dir = h.write(tmp_path / "run", test, tail)
        result = check_path(run_dir, spark_master=MASTER)
        assert "error" not in result["checkers"]["queue"], result["checkers"]["queue"]["error"]
        assert json.loads((run_dir / "results.json").read_text()) == result
        return result
    return run


def counts(**nonzero: int) -> dict[str, int]:
    return {**ZERO, **nonzero}


def clean_history() -> HistoryBuilder:
    h = HistoryBuilder()
    h.send(0, 1, 0, offset=0).send(1, 2, 1, offset=0).send(0, 3, 0, offset=1)
    h.poll(2, [(0, 0, 1), (1, 0, 2)])
    h.drain(3, 0, [(0, 0, 1), (0, 1, 3)])
    h.drain(3, 1, [(1, 0, 2)], complete=False).drain(3, 1, [], complete=True)
    return h


# --- the verdict on each anomaly -------------------------------------------------------

@pytest.mark.spark
def test_spark_is_loopback_only_without_ui(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.appName == "kchaos-check"


@pytest.mark.spark
def test_clean_history_is_valid(check):
    r = check(clean_history(), idempotent_test(True))
    assert r["valid"] is True
    assert r["counts"] == counts(acked=3)
    assert r["examples"] == {"acked": [1, 2, 3]}
    assert r["stats"] == {
        "nemesis_ops": 0, "unparsed_lines": 0, "malformed_client_ops": 0,
        "send_invoke": 3, "send_ok": 3, "send_fail": 0, "send_info": 0,
        "poll_ok": 1, "drain_ok": 3,
        "partitions_complete": [0, 1], "partitions_incomplete": [],
        "values_read": 3, "malformed_records": 0,
    }
    assert r["checkers"]["queue"]["valid"] is True
    assert r["checkers"]["queue"]["idempotence"] is True
    assert r["checkers"]["queue"]["loss"] == {"acks": "all", "promised": True,
                                              "expected_by_configuration": False}
    # checkers.SUMMARY_KEYS are copied to the top level, beside the verdict (checkers/verdict/judge.py).
    assert set(r) == {"valid", "verdict", "failed", "allowed", "why", "undecided", "page_cache", "counts", "examples",
                      "loss", "stats", "latency_ms", "timeline", "checkers", "history", "nemesis", "send_errors"}
    assert r["send_errors"] == {}  # every send succeeded
    assert (r["verdict"], r["failed"], r["allowed"], r["undecided"]) == ("pass", {}, {}, [])
    assert exit_code(r["valid"]) == exit_code(r["verdict"]) == 0


@pytest.mark.spark
def test_lost(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1)
    h.drain(1, 0, [(0, 0, 1)])
    r = check(h)
    assert r["valid"] is False
    assert r["counts"] == counts(acked=2, lost=1)
    assert r["examples"]["lost"] == [2]
    assert exit_code(r["valid"]) == 1


@pytest.mark.spark
def test_examples_are_the_ten_smallest(check):
    h = HistoryBuilder()
    for i, value in enumerate(range(112, 99, -1)):  # 13 values, sent largest first
        h.send(i % 2, value, 0, offset=i)
    h.drain(2, 0, [(0, 0, 112)])
    r = check(h)
    assert r["counts"] == counts(acked=13, lost=12)
    assert r["examples"]["lost"] == list(range(100, 110))
    assert r["examples"]["acked"] == list(range(100, 110))


@pytest.mark.spark
def test_unseen_is_unknown(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 1, offset=0)
    h.drain(1, 0, [(0, 0, 1)]).drain(1, 1, [], complete=False)
    r = check(h, idempotent_test(False))
    assert r["valid"] == "unknown"
    assert r["counts"] == counts(acked=2, unseen=1)
    assert r["examples"] == {"acked": [1, 2], "unseen": [2]}
    assert (r["stats"]["partitions_complete"], r["stats"]["partitions_incomplete"]) == ([0], [1])
    assert exit_code(r["valid"]) == 2


@pytest.mark.spark
def test_lost_outweighs_unseen(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 1, offset=0).send(0, 3, 0, offset=1)
    h.drain(1, 0, [(0, 0, 1)]).drain(1, 1, [], complete=False)
    r = check(h)
    assert r["valid"] is False
    assert r["counts"] == counts(acked=3, lost=1, unseen=1)
    assert (r["examples"]["lost"], r["examples"]["unseen"]) == ([3], [2])


@pytest.mark.spark
def test_partition_without_final_read_is_incomplete(check):
    # test.json says there are 2 partitions; partition 1 was never drained.
    h = HistoryBuilder().send(0, 1, 1, offset=0).drain(1, 0, [])
    r = check(h, idempotent_test(False))
    assert r["valid"] == "unknown"
    assert r["counts"] == counts(acked=1, unseen=1)
    assert (r["stats"]["partitions_complete"], r["stats"]["partitions_incomplete"]) == ([0], [1])


@pytest.mark.spark
def test_acked_offset_mismatch(check):
    h = HistoryBuilder().send(0, 10, 0, offset=5).send(0, 11, 0, outcome="info")
    h.drain(1, 0, [(0, 5, 11), (0, 6, 10)])
    r = check(h)
    assert r["valid"] is False
    assert r["counts"] == counts(acked=1, acked_offset_mismatch=1)
    assert r["examples"]["acked_offset_mismatch"] == [10]


@pytest.mark.spark
@pytest.mark.parametrize("idempotence, valid", [(True, False), (False, True)])
def test_duplicate_invalid_only_with_idempotence(check, idempotence, valid):
    h = HistoryBuilder().send(0, 7, 0, offset=1).send(0, 8, 0, offset=3)
    h.poll(1, [(0, 1, 7)]).drain(1, 0, [(0, 1, 7), (0, 2, 7), (0, 3, 8)])
    r = check(h, idempotent_test(idempotence))
    assert r["valid"] is valid
    assert r["counts"] == counts(acked=2, duplicate=1)
    assert r["examples"]["duplicate"] == [7]


@pytest.mark.spark
def test_inconsistent_offset(check):
    h = HistoryBuilder().send(0, 4, 0, outcome="info").send(0, 5, 0, outcome="info")
    h.poll(1, [(0, 3, 4)]).drain(1, 0, [(0, 3, 5)])
    r = check(h)
    assert r["valid"] is False
    assert r["counts"] == counts(inconsistent_offset=1)
    assert r["examples"] == {"inconsistent_offset": [[0, 3]]}


@pytest.mark.spark
def test_unexpected(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0).drain(1, 0, [(0, 0, 1), (0, 1, 99)])
    r = check(h)
    assert r["valid"] is False
    assert r["counts"] == counts(acked=1, unexpected=1)
    assert r["examples"]["unexpected"] == [99]


@pytest.mark.spark
def test_failed_visible_is_reported_but_valid(check):
    h = HistoryBuilder().send(0, 5, 0, outcome="fail").send(0, 6, 0, offset=1)
    h.drain(1, 0, [(0, 0, 5), (0, 1, 6)])
    r = check(h)
    assert r["valid"] is True
    assert r["counts"] == counts(acked=1, failed_visible=1)
    assert r["examples"]["failed_visible"] == [5]
    assert (r["stats"]["send_fail"], r["stats"]["send_ok"]) == (1, 1)


@pytest.mark.spark
def test_info_sends_never_read_are_not_lost(check):
    h = HistoryBuilder().send(0, 1, 0, outcome="info").send(1, 2, 0, outcome="info")
    h.send(0, 3, 0, offset=0).drain(2, 0, [(0, 0, 3)])
    r = check(h)
    assert r["valid"] is True
    assert r["counts"] == counts(acked=1)
    assert r["stats"]["send_info"] == 2


@pytest.mark.spark
def test_lost_by_the_read_bound(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1)
    h.send(0, 3, 0, outcome="info").send(0, 4, 1, offset=0)
    h.poll(1, [(0, 0, 1)]).drain(2, 0, [(0, 2, 3)], complete=False).drain(2, 1, [], complete=False)
    r = check(h, idempotent_test(False))
    assert r["valid"] is False
    assert r["counts"] == counts(acked=3, lost=1, unseen=1)
    assert (r["examples"]["lost"], r["examples"]["unseen"]) == ([2], [4])


def three_drained() -> HistoryBuilder:
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1).send(0, 3, 0, offset=2)
    return h.drain(1, 0, [(0, 0, 1), (0, 1, 2), (0, 2, 3)])


@pytest.mark.spark
def test_poll_skip(check):
    h = three_drained()
    h.op(4, "invoke", "assign", partitions=[0])
    h.op(4, "ok", "assign", partitions=[0])
    h.poll(4, [(0, 0, 1)]).poll(4, [(0, 2, 3)])
    h.poll(5, [(0, 2, 3), (0, 5, 3)])  # nothing shows offsets 3 and 4 exist: no skip
    r = check(h)
    assert r["valid"] is False
    assert r["counts"] == counts(acked=3, poll_skip=1, duplicate=1)
    assert r["examples"]["poll_skip"] == [[4, 0, 0, 2]]


@pytest.mark.spark
@pytest.mark.parametrize("reset", [None, "assign", "info"])
def test_nonmonotonic_poll_and_resets(check, reset):
    h = three_drained().poll(4, [(0, 0, 1), (0, 1, 2)])
    if reset == "assign":
        h.op(4, "invoke", "assign", partitions=[0])
        h.op(4, "ok", "assign", partitions=[0])
    elif reset == "info":
        h.poll(4, [], outcome="info")
    h.poll(4, [(0, 1, 2), (0, 2, 3)]).poll(5, [(0, 1, 2), (0, 0, 1)])
    r = check(h)
    assert r["valid"] is False
    back = [[4, 0, 1, 1], [5, 0, 1, 0]] if reset is None else [[5, 0, 1, 0]]
    assert r["counts"] == counts(acked=3, nonmonotonic_poll=len(back))
    assert r["examples"]["nonmonotonic_poll"] == back


@pytest.mark.spark
@pytest.mark.parametrize("idempotence, valid", [(True, False), (False, True)])
def test_nonmonotonic_send_invalid_only_with_idempotence(check, idempotence, valid):
    h = HistoryBuilder().send(0, 1, 0, offset=5).send(0, 2, 0, offset=3)
    h.send(1, 3, 0, offset=4).send(0, 4, 1, offset=0)  # other processes and partitions: not compared
    h.drain(2, 0, [(0, 3, 2), (0, 4, 3), (0, 5, 1)]).drain(2, 1, [(1, 0, 4)])
    r = check(h, idempotent_test(idempotence))
    assert r["valid"] is valid
    assert r["counts"] == counts(acked=4, nonmonotonic_send=1)
    assert r["examples"]["nonmonotonic_send"] == [2]


@pytest.mark.spark
@pytest.mark.parametrize("producer, topic, promised", [
    ({"acks": "1"}, {}, False), ({"acks": "all"}, {"min_insync": 1}, True),
    ({"acks": "-1"}, {"unclean": True}, False), ({}, {}, True)])
def test_loss_summary(spark, tmp_path, producer, topic, promised):
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1).drain(1, 0, [(0, 0, 1)])
    test = {"producer": producer, "topic": topic}
    r = QueueChecker(master=MASTER).check(test, h.write(tmp_path, test) / "history.jsonl")
    assert (r["valid"], r["counts"]["lost"]) == (False, 1)
    assert r["loss"] == {"acks": producer.get("acks", "all"), "promised": promised,
                         "expected_by_configuration": not promised}


@pytest.mark.spark
def test_completion_inherits_value_and_partition_from_invoke(check):
    h = HistoryBuilder()
    h.op(0, "invoke", "send", topic="t", partition=0, value=5)
    h.op(0, "ok", "send", offset=0)
    h.drain(1, 0, [])
    r = check(h)
    assert r["counts"] == counts(acked=1, lost=1)
    assert r["examples"]["lost"] == [5]


# --- robustness ----------------------------------------------------------------------

ODD = {"value": {"x": [1, "a"]}, "partition": [["n1"], ["n2", "n3"]], "node": ["n1"],
       "nodes": ["n1", "n2"], "offset": 1.5, "records": "x", "complete": "yes", "targets": None}


@pytest.mark.spark
def test_nemesis_ops_with_odd_fields_are_ignored(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0)
    h.nemesis("kill", **ODD).nemesis("start", node="n1", value="n1")
    h.nemesis("partition", partition={"n1": ["n2"]}, value=[1, 2], complete=True)
    h.nemesis("send", value=2, partition=0, offset=1)  # a nemesis "send" is not a send
    h.op("nemesis", "ok", "drain", partition=0, records=[[0, 1, 2]], complete=True)
    h.drain(1, 0, [(0, 0, 1)])
    r = check(h)
    assert r["valid"] is True
    assert r["counts"] == counts(acked=1)
    assert r["stats"]["nemesis_ops"] == 9
    assert r["stats"]["unparsed_lines"] == 2  # the two "kill" lines, skipped as nemesis ops
    assert (r["stats"]["send_invoke"], r["stats"]["drain_ok"]) == (1, 1)


@pytest.mark.spark
def test_value_read_but_only_sent_by_nemesis_is_unexpected(check):
    h = HistoryBuilder().send(0, 1, 0, offset=0).nemesis("send", value=99)
    h.drain(1, 0, [(0, 0, 1), (0, 1, 99)])
    r = check(h)
    assert r["counts"] == counts(acked=1, unexpected=1)


TRUNCATED = '{"index": 99, "time": 1, "process": 0, "type": "ok", "f": "send", "val'


@pytest.mark.spark
def test_truncated_last_line_is_tolerated(check):
    r = check(clean_history(), tail=TRUNCATED)
    assert r["counts"] == counts(acked=3)  # judged on the lines before it, and said: the run cannot pass
    assert r["history"] == {"lines": 14, "cut_off_last_line": True, "unparsed_lines": 1}
    assert (r["verdict"], r["undecided"]) == (
        "unknown", ["the last line of the history was cut off; judged on the 14 lines before it"])
    assert (r["stats"]["unparsed_lines"], r["stats"]["malformed_client_ops"]) == (1, 0)


@pytest.mark.spark
def test_queue_checker_alone_tolerates_truncated_last_line(spark, tmp_path):
    run_dir = clean_history().write(tmp_path, tail=TRUNCATED)
    r = QueueChecker(master=MASTER).check({}, run_dir / "history.jsonl")
    assert (r["valid"], r["counts"], r["idempotence"]) == (True, counts(acked=3), False)


@pytest.mark.spark
def test_queue_checker_alone_is_unsure_about_malformed_client_ops(spark, tmp_path):
    h = clean_history()
    h.op(5, "ok", "drain", partition=0, records=[[0, 0]], complete=True)
    h.op(6, "ok", "send", partition=0, value=3, offset="three")
    r = QueueChecker(master=MASTER).check({}, h.write(tmp_path) / "history.jsonl")
    assert r["valid"] == "unknown"
    assert (r["stats"]["malformed_records"], r["stats"]["malformed_client_ops"]) == (1, 1)


@pytest.mark.spark
def test_path_with_characters_hadoop_misreads(spark, tmp_path):
    run_dir = clean_history().write(tmp_path / "queue 2024-01-01T12:00:00 [x]")
    (run_dir / "history.jsonl").rename(run_dir / "_h.jsonl")
    r = check_path(run_dir / "_h.jsonl", spark_master=MASTER)
    assert (r["valid"], r["counts"]["acked"]) == (True, 3)
    assert (run_dir / "results.json").exists()


@pytest.mark.spark
def test_bare_history_file_uses_test_json_beside_it(spark, tmp_path):
    h = HistoryBuilder().send(0, 7, 0, offset=1).drain(1, 0, [(0, 1, 7), (0, 2, 7)])
    run_dir = h.write(tmp_path, idempotent_test(True))
    r = check_path(run_dir / "history.jsonl", spark_master=MASTER)
    assert (r["valid"], r["counts"]["duplicate"]) == (False, 1)
    assert json.loads((tmp_path / "results.json").read_text()) == r


# --- bad input -----------------------------------------------------------------------

def write_lines(tmp_path: Path, lines: list[str]) -> Path:
    (tmp_path / "history.jsonl").write_text("".join(line + "\n" for line in lines))
    return tmp_path


def good_lines(n: int) -> list[str]:
    return HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1).text().splitlines()[:n]


@pytest.mark.parametrize("bad_line, message", [
    ("this is not json", r"history.jsonl:3: not JSON"),
    ('{"index": 2, "time": 3, "process": 0, "type": "maybe", "f": "send"}', r":3: unknown type 'maybe'"),
    ('{"index": 2, "time": 3, "process": 0, "type": "invoke", "f": "send", "value": "x"}',
     r":3: send value must be an integer, got 'x'"),
    ('{"index": 2, "time": 3, "process": 0, "type": "ok", "f": "poll", "records": [[0, 1]]}',
     r":3: record \[0, 1\] is not \[partition, offset, value\]"),
    ('{"index": 2, "time": 3, "process": 5, "type": "ok", "f": "poll", "records": []}',
     r":3: ok poll of process 5 completes no invocation"),
])
def test_malformed_line_is_bad_input_naming_the_line(tmp_path, bad_line, message):
    run_dir = write_lines(tmp_path, good_lines(2) + [bad_line] + good_lines(4)[2:])
    with pytest.raises(CheckInputError, match=message):
        check_path(run_dir)
    assert not (run_dir / "results.json").exists()


def test_missing_inputs_are_bad_input(tmp_path):
    with pytest.raises(CheckInputError, match="no such file"):
        check_path(tmp_path / "nope")
    with pytest.raises(CheckInputError, match="no history.jsonl"):
        check_path(tmp_path)
    (tmp_path / "test.json").write_text("{oops")
    write_lines(tmp_path, good_lines(2))
    with pytest.raises(CheckInputError, match="test.json: unreadable"):
        check_path(tmp_path)
    assert issubclass(CheckInputError, ValueError)


# --- latency -------------------------------------------------------------------------

@pytest.mark.spark
def test_latency_quantiles(check):
    h = HistoryBuilder()
    for i in range(10):
        h.send(i % 2, i, 0, offset=i, latency_ms=i + 1)  # ok latencies 1..10 ms
    h.send(0, 10, 0, outcome="fail", latency_ms=20)
    h.poll(2, [], latency_ms=3).poll(2, [], latency_ms=7)
    h.drain(3, 0, [(0, i, i) for i in range(10)])
    lat = check(h)["latency_ms"]
    assert lat == {
        "send": {"ok": {"count": 10, "p50": 5.0, "p90": 9.0, "p99": 10.0, "max": 10.0},
                 "fail": {"count": 1, "p50": 20.0, "p90": 20.0, "p99": 20.0, "max": 20.0}},
        "poll": {"ok": {"count": 2, "p50": 3.0, "p90": 7.0, "p99": 7.0, "max": 7.0}},
    }


@pytest.mark.spark
def test_latency_pairs_interleaved_processes_by_order(check):
    h = HistoryBuilder()
    h.op(0, "invoke", "send", partition=0, value=1, after_ms=1)
    h.op(1, "invoke", "send", partition=0, value=2, after_ms=1)
    h.op(0, "ok", "send", partition=0, value=1, offset=0, after_ms=2.5)   # 3.5 ms after its invoke
    h.op(1, "info", "send", partition=0, value=2, after_ms=6)             # 8.5 ms
    lat = check(h)["latency_ms"]
    assert lat == {"send": {
        "ok": {"count": 1, "p50": 3.5, "p90": 3.5, "p99": 3.5, "max": 3.5},
        "info": {"count": 1, "p50": 8.5, "p90": 8.5, "p99": 8.5, "max": 8.5}}}


# --- composition ---------------------------------------------------------------------

class Fixed:
    def __init__(self, result: Any):
        self.result = result

    def check(self, test: dict, history_path: Path) -> Any:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_merge_valid_and_exit_codes():
    assert merge_valid() is True
    assert merge_valid(True, True) is True
    assert merge_valid(True, "unknown") == "unknown"
    assert merge_valid("unknown", False, True) is False
    with pytest.raises(ValueError):
        merge_valid(1)
    assert [exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]
    with pytest.raises(ValueError):
        exit_code(None)


def test_run_checkers_turns_a_crash_into_unknown():
    out = run_checkers({"a": Fixed({"valid": True}), "b": Fixed(RuntimeError("boom")),
                        "c": Fixed({"valid": 1})}, {}, Path("h"))
    assert out["valid"] == "unknown"
    assert out["a"] == {"valid": True}
    assert out["b"] == {"valid": "unknown", "error": "RuntimeError: boom"}
    assert out["c"]["error"].startswith("TypeError: checker returned no valid verdict")
    assert run_checkers({"a": Fixed({"valid": False}), "b": Fixed(KeyError("k"))},
                        {}, Path("h"))["valid"] is False


# --- against the reference checker ------------------------------------------------------



# One Spark job checks a batch of histories (checkers.check_runs), so a single example holds many:
# a Spark check costs seconds however small the history. The histories are arbitrary (offsets
# collide, polls go back and forth), unlike the corpus's.
HISTORY = st.fixed_dictionaries(dict(
    sends=st.lists(SEND, min_size=1, max_size=20), strays=st.lists(st.integers(0, 4), max_size=2),
    complete=st.tuples(st.booleans(), st.booleans()), idempotent=st.booleans(), assign_at=st.integers(0, 3)))


@pytest.mark.spark
@settings(max_examples=1, deadline=None, database=None)
@given(batch=st.lists(HISTORY, min_size=10, max_size=10))
def test_agrees_with_reference(spark, tmp_path_factory, batch):
    root = tmp_path_factory.mktemp("model")
    made = []
    for n, d in enumerate(batch):
        h = HistoryBuilder()
        polled = add_random_sends(h, d["sends"], d["strays"])
        for i, chunk in enumerate((polled[0::4], polled[2::4])):  # two polls of one consumer
            if i == d["assign_at"]:
                h.op(5, "invoke", "assign", partitions=[0, 1])
                h.op(5, "ok", "assign", partitions=[0, 1])
            h.poll(5, chunk)
        for p in (0, 1):
            h.drain(6, p, [r for r in polled[1::2] if r[0] == p], complete=d["complete"][p])
        test = idempotent_test(d["idempotent"])
        made.append((h.write(root / f"run{n:02d}", test), h, test))
    rows = check_runs(root, [run for run, _, _ in made], MASTER)
    assert [r["error"] for r in rows] == [None] * len(made)
    for run_dir, h, test in made:
        r = json.loads((run_dir / "results.json").read_text())
        ref = check_reference(h.ops, test)
        assert (r["valid"], r["counts"], r["examples"]) == (ref["valid"], ref["counts"], ref["examples"]), run_dir
        assert r["checkers"]["queue"]["loss"] == ref["loss"]


# --- availability as time ----------------------------------------------------------------

@pytest.mark.spark
def test_outages_are_the_stretches_with_no_acknowledgement_as_the_scenario_metrics_see_them(check, tmp_path):
    h = HistoryBuilder()
    for i in range(10):  # an ack 200 ms after each send, but one 3 s after
        h.send(0, i, 0, offset=i, latency_ms=3000 if i == 5 else 200)
    h.drain(1, 0, [(0, i, i) for i in range(10)])
    r = check(h)
    o = r["timeline"]["outages"]
    assert o["count"] == 1 and o["longest_s"] == pytest.approx(3.0, abs=0.02), o
    assert 0 < o["acked_share"] < 1 and o["stretches"][0]["seconds"] == o["longest_s"]
    m = observe(tmp_path / "run")
    assert m["longest_outage_s"] == pytest.approx(o["longest_s"], abs=0.1)


def test_a_checker_that_failed_in_a_spark_task_is_told_by_the_tasks_own_exception():
    from kchaos.checkers.compose import checker_error

    class Py4JJavaError(Exception):
        pass
    jvm = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
           ": org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown from the Python "
           "worker: Traceback (most recent call last):\n  File \"/x/worker.py\", line 4327, in invoke_udf\n"
           "    run_process()\n  File \"/x/tasks.py\", line 89, in collect_task\n    for k in d:\n"
           "ZeroDivisionError: division by zero\n SQLSTATE: 38000\n\tat org.apache.spark.api.python.Runner.read(x)\n"
           "\tat java.base/java.lang.Thread.run(Thread.java:840)\n")
    assert checker_error(Py4JJavaError(jvm)) == "Py4JJavaError in a Spark task: ZeroDivisionError: division by zero"
    assert checker_error(ValueError("no such file")) == "ValueError: no such file"
