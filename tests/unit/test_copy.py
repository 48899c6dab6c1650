"""The copy workload (`--workload copy`): its options, its checker's four kinds on tiny hand-made histories and on
planted random ones, and the verdict it gets."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers import check_path
from kchaos.checkers.copy.check import check_copy_ops, compare, out_of_order
from kchaos.checkers.verdict.judge import judge
from kchaos.checkers.verdict.observed import METRICS
from kchaos.core.config import TestConfig
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.workloads.copy.workload import input_records, input_topic

COPY = ["--workload", "copy"]


def run_cfg(*argv: str) -> TestConfig:
    return TestConfig.from_dict(config_from_args(build_parser().parse_args(["run", "--seed", "1", *argv])).to_dict())


# --- options ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, needle", [
    ([*COPY, "--txn-size", "0"], "--txn-size must be 1..10000 records, got 0"),
    ([*COPY, "--txn-size", "10001"], "--txn-size must be 1..10000 records, got 10001"),
    ([*COPY, "--copy-records", "-1"], "--copy-records must be 0..10000000"),
    ([*COPY, "--consumers", "0"], "--workload copy needs --consumers >= 1"),
    ([*COPY, "--txn-isolation", "dirty"], "--txn-isolation must be one of read_committed, read_uncommitted"),
    ([*COPY, "--rate", "max"], "--workload copy with --rate max needs --copy-records N"),
    ([*COPY, "--in-flight", "2"], "--workload copy runs its copiers in the harness"),
    (["--copy-order"], "--copy-order applies to --workload copy only"),
    (["--txn-size", "5"], "--txn-size applies to --workload copy only"),
    (["--workload", "txn", "--copy-records", "5"], "--copy-records applies to --workload copy only"),
    (["--txn-size", "many"], "argument --txn-size: invalid int value: 'many'"),
])
def test_bad_copy_options_are_one_line_errors_exiting_3(argv, needle, refused_run):
    refused_run(argv, needle)


def test_copy_settings_go_in_test_json_and_replay():
    c = run_cfg(*COPY, "--copy-order", "--txn-size", "7", "--copy-records", "500", "--nemesis", "crash-client")
    w = c.to_dict()["workload"]
    assert (w["kind"], w["options"]) == ("copy", {"order": True, "txn_size": 7, "records": 500,
                                                  "isolation": "read_committed"})
    assert c.producer.idempotence  # the copiers' producers are transactional
    assert TestConfig.from_dict(c.to_dict()) == c
    dirty = run_cfg(*COPY, "--txn-isolation", "read_uncommitted").to_dict()["workload"]
    assert dirty["options"]["isolation"] == "read_uncommitted"  # the checker reads it
    assert run_cfg().to_dict()["workload"]["options"] == {"group_commit": "sync"}  # a queue run's: its own
    assert input_topic(c).partitions == 1 and input_topic(c).name == f"{c.topic.name}-in"
    assert input_records(c) == 500
    plain = run_cfg(*COPY, "--partitions", "3", "--rate", "50", "--time-limit", "20")
    assert input_topic(plain).partitions == 3 and input_records(plain) == 1000


def test_copy_runs_on_the_java_client_too_and_test_json_says_so():
    c = run_cfg(*COPY, "--client", "java", "--kafka-version", "4.1.0", "--nemesis", "crash-client")
    w = c.to_dict()["workload"]
    assert (w["kind"], w["client"], w["client_version"]) == ("copy", "java", "4.1.0")
    assert TestConfig.from_dict(c.to_dict()) == c


def test_copy_metrics_can_be_predicted():
    assert {"copy_missing", "copy_duplicate", "copy_invented", "copy_reordered"} <= set(METRICS)


# --- the checker on tiny histories ----------------------------------------------------------

def test_kinds_on_tiny_lists():
    assert compare([1, 2, 3], [1, 2, 3], order=[1, 2, 3]) == {
        "copy_missing": [], "copy_duplicate": [], "copy_invented": [], "copy_reordered": []}
    found = compare([1, 2, 3, 4], [1, 3, 3, 9, 2], order=[1, 3, 3, 9, 2])
    assert found["copy_missing"] == [4] and found["copy_duplicate"] == [3] and found["copy_invented"] == [9]
    assert found["copy_reordered"] in ([2], [3])  # either one moved restores the order
    assert compare([1, 2], [1, 2, 7], unacked=[7])["copy_invented"] == []  # an unacked fill value may be there
    assert compare([1, 2, 7], [1, 2], unacked=[7])["copy_missing"] == [7]  # ... but an acked one must
    assert len(out_of_order([1, 2, 3, 4, 5], [2, 1, 3, 5, 4])) == 2
    assert out_of_order([1, 2, 3], [3, 1, 2]) == [3]


def copy_test(order=False, isolation="read_committed", partitions=1):
    return {"topic": {"name": "t", "partitions": partitions},
            "workload": {"kind": "copy", "options": {"order": order, "isolation": isolation}}}


def history(inputs, outputs, complete=True, unacked=()):
    """Ops of a copy run: one fill of `inputs` to partition 0, and a final read of output partition 0."""
    ops = [{"type": "invoke", "f": "fill", "process": 2, "topic": "t-in"},
           {"type": "info" if unacked else "ok", "f": "fill", "process": 2, "topic": "t-in",
            "records": [[0, i, v] for i, v in enumerate(inputs)], **({"unacked": list(unacked)} if unacked else {})},
           {"type": "invoke", "f": "copy", "process": 0, "value": [[0, 0, inputs[0]]] if inputs else []},
           {"type": "ok", "f": "copy", "process": 0, "value": [], "sent": []},
           {"type": "invoke", "f": "drain", "process": 3, "topic": "t", "partition": 0},
           {"type": "ok", "f": "drain", "process": 3, "topic": "t", "partition": 0, "complete": complete,
            "records": [[0, o, v] for o, v in enumerate(outputs)]}]
    return ops


def test_clean_copy_passes():
    r = check_copy_ops(history([5, 6, 7], [5, 6, 7]), copy_test(order=True))
    assert r["valid"] is True
    assert {k: r["counts"][k] for k in ("copy_missing", "copy_duplicate", "copy_invented", "copy_reordered")} == \
        dict.fromkeys(("copy_missing", "copy_duplicate", "copy_invented", "copy_reordered"), 0)
    assert (r["counts"]["input"], r["counts"]["output"]) == (3, 3)


@pytest.mark.parametrize("outputs, kind, example", [
    ([5, 6], "copy_missing", 7),
    ([5, 6, 6, 7], "copy_duplicate", 6),
    ([5, 6, 7, 8], "copy_invented", 8),
    ([6, 7, 5], "copy_reordered", 5),
])
def test_each_kind_is_found_and_fails(outputs, kind, example):
    r = check_copy_ops(history([5, 6, 7], outputs), copy_test(order=True))
    assert r["valid"] is False and r["counts"][kind] == 1 and r["examples"][kind] == [example]
    others = [k for k in ("copy_missing", "copy_duplicate", "copy_invented", "copy_reordered") if k != kind]
    assert all(r["counts"][k] == 0 for k in others)


def test_order_is_checked_only_with_copy_order():
    assert check_copy_ops(history([5, 6, 7], [7, 6, 5]), copy_test(order=False))["valid"] is True


def test_an_incomplete_final_read_leaves_missing_values_unknown():
    r = check_copy_ops(history([5, 6, 7], [5], complete=False), copy_test())
    assert r["valid"] == "unknown" and r["incomplete_partitions"] == [0]
    j = judge({"valid": r["valid"], "counts": r["counts"], "checkers": {"copy": r}}, copy_test())
    assert j.verdict == "unknown" and not j.failed  # the missing values may be in what was never read


def test_input_the_copy_never_reached_is_uncopied_not_missing_and_leaves_the_run_unknown():
    """A copy that stopped short (the `copied` op's `behind`: partition 0 committed at offset 2 of 5) is no evidence
    against exactly-once for the values at or past offset 2; a value before it absent from the output is."""
    copied = [{"type": "invoke", "f": "copied", "process": 3, "topic": "t-in"},
              {"type": "info", "f": "copied", "process": 3, "topic": "t-in", "complete": False, "behind": [[0, 2, 5]]}]
    r = check_copy_ops(history([5, 6, 7, 8, 9], [5, 6]) + copied, copy_test())
    assert r["valid"] == "unknown" and r["counts"]["copy_missing"] == 0 and r["counts"]["uncopied"] == 3
    assert r["uncopied"] == {"0": 2}
    j = judge({"valid": r["valid"], "counts": r["counts"], "checkers": {"copy": r}}, copy_test())
    assert j.verdict == "unknown" and not j.failed
    assert j.undecided == ("the copy stopped short of the input's end (partition 0 at offset 2): 3 values were never "
                           "copied, which says nothing of exactly-once",)
    r = check_copy_ops(history([5, 6, 7, 8, 9], [5]) + copied, copy_test())  # 6 sat below the committed offset
    assert r["valid"] is False and r["examples"]["copy_missing"] == [6] and r["counts"]["uncopied"] == 3


def judged(inputs, outputs, isolation="read_committed"):
    r = check_copy_ops(history(inputs, outputs), copy_test(isolation=isolation))
    return judge({"valid": r["valid"], "counts": r["counts"], "checkers": {"copy": r}},
                 copy_test(isolation=isolation))


def test_verdict_fails_every_kind_under_read_committed_and_allows_duplicates_under_read_uncommitted():
    j = judged([1, 2, 3], [1, 2, 2, 3])
    assert j.verdict == "fail" and j.failed == {"copy_duplicate": 1}
    j = judged([1, 2, 3], [1, 2, 2, 3], isolation="read_uncommitted")
    assert j.verdict == "pass" and j.allowed == {"copy_duplicate": 1}
    j = judged([1, 2, 3], [1, 2], isolation="read_uncommitted")
    assert j.verdict == "fail" and j.failed == {"copy_missing": 1}
    assert judged([1, 2, 3], [1, 2, 3]).verdict == "pass"


def test_check_path_writes_results_with_copy_counts(tmp_path):
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in history([1, 2], [1, 2, 2])))
    (tmp_path / "test.json").write_text(json.dumps(copy_test()))
    r = check_path(tmp_path)
    assert r["verdict"] == "fail" and r["counts"]["copy_duplicate"] == 1 and r["failed"] == {"copy_duplicate": 1}
    assert json.loads((tmp_path / "results.json").read_text())["counts"]["copy_duplicate"] == 1


# --- planted anomalies (hypothesis) ------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**32), drops=st.integers(0, 20), dups=st.integers(0, 20),
       invented=st.integers(0, 5), swaps=st.integers(0, 20))
def test_counts_equal_the_planted_ones(n, seed, drops, dups, invented, swaps):
    rng = random.Random(seed)
    inputs = rng.sample(range(10 * n + 10), n)
    dropped = set(rng.sample(inputs, min(drops, n)))
    out = [v for v in inputs if v not in dropped]
    # Swap disjoint adjacent pairs: each needs exactly one value moved back.
    starts = sorted(rng.sample(range(0, len(out) // 2), min(swaps, len(out) // 2)))
    for s in starts:
        i = 2 * s
        out[i], out[i + 1] = out[i + 1], out[i]
    ordered = list(out)
    extra = [rng.choice(out) for _ in range(dups)] if out else []
    fake = [-(i + 1) for i in range(invented)]
    full = ordered + extra + fake  # duplicates and invented values after every first occurrence
    found = compare(inputs, full, order=full)
    assert len(found["copy_missing"]) == len(dropped)
    assert len(found["copy_duplicate"]) == len(extra)
    assert len(found["copy_invented"]) == invented
    assert len(found["copy_reordered"]) == len(starts)
