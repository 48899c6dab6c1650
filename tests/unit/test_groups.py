"""Consumer groups (`--consumer-mode subscribe`): the options, the history shapes and the two group counts,
reference and Spark alike, on tiny histories."""
from __future__ import annotations

import struct
from typing import Any

import pytest
from confluent_kafka import KafkaError
from histories import HistoryBuilder

from kchaos.checkers.parquet import convert
from kchaos.checkers.queue.check import QueueChecker
from kchaos.checkers.queue.reference import check_reference
from kchaos.checkers.spark import spark_session
from kchaos.checkers.verdict.judge import judge
from kchaos.core.config import TestConfig
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.workloads.clients import make_group_consumer
from kchaos.workloads.queue.group import commit_outcome
from kchaos.workloads.rebalance import generation_of, group_id, parse_generation

MASTER = "local[2]"
SUBSCRIBE = ["--consumer-mode", "subscribe"]


def run_cfg(*argv: str) -> TestConfig:
    return TestConfig.from_dict(config_from_args(build_parser().parse_args(["run", "--seed", "1", *argv])).to_dict())


# --- options ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv, needle", [
    (["--consumer-mode", "groups"], "--consumer-mode must be one of assign, subscribe; got 'groups'"),
    (["--group-protocol", "consumer"], "--group-protocol only applies to --consumer-mode subscribe"),
    (["--group-commit", "auto"], "--group-commit only applies to --consumer-mode subscribe"),
    ([*SUBSCRIBE, "--group-commit", "later"], "--group-commit must be one of sync, auto"),
    ([*SUBSCRIBE, "--group-protocol", "consumer"],
     "--group-protocol consumer (KIP-848) needs Kafka 4.0 or later, not --kafka-version 3.7.2"),
    ([*SUBSCRIBE, "--workload", "txn", "--group-commit", "auto"], "--group-commit applies to --workload queue only"),
    (["--workload", "txn", "--txn-sub-p", "1"], "--txn-sub-p must be a fraction in [0, 1), got 1.0"),
    (["--txn-sub-p", "0.1"], "--txn-sub-p applies to --workload txn only"),
    ([*SUBSCRIBE, "--consumers", "0"], "--consumer-mode subscribe needs --consumers >= 1"),
    (["--nemesis", "crash-client"], "--nemesis crash-client crashes group members: it needs --consumer-mode subscribe"),
])
def test_bad_group_options_are_one_line_errors_exiting_3(argv, needle, refused_run):
    refused_run(argv, needle)


def test_group_settings_go_in_test_json_and_replay():
    c = run_cfg(*SUBSCRIBE, "--group-commit", "auto")
    w = c.to_dict()["workload"]
    assert (w["consumer_mode"], w["options"]["group_commit"], w["group_protocol"]) == ("subscribe", "auto", "classic")
    assert TestConfig.from_dict(c.to_dict()) == c
    assert run_cfg(*SUBSCRIBE, "--kafka-version", "4.0.0", "--group-protocol", "consumer").workload.group_protocol \
        == "consumer"
    assert run_cfg(*SUBSCRIBE).workload.options.group_commit == "sync"
    assert run_cfg().to_dict()["workload"]["consumer_mode"] == "assign"  # every field is written
    assert group_id(7) == "kchaos-7-group"


# --- what the client tells --------------------------------------------------------------

def test_generation_is_read_from_librdkafkas_group_metadata():
    assert parse_generation(b"CGMDv2:" + struct.pack("=i", 12) + b"g\x00m\x00\x01") == 12
    assert parse_generation(b"CGMDv9:whatever") is None
    consumer = make_group_consumer("127.0.0.1:9", "c0", "g", auto_commit=False)  # never connects: not polled
    try:
        assert generation_of(consumer) == -1  # no generation before it joins
    finally:
        consumer.close()


def test_commit_outcomes():
    assert commit_outcome(KafkaError(KafkaError.REBALANCE_IN_PROGRESS)) == "fail"
    assert commit_outcome(KafkaError(KafkaError.ILLEGAL_GENERATION)) == "fail"
    assert commit_outcome(KafkaError(KafkaError._TIMED_OUT)) == "info"


# --- history shapes ---------------------------------------------------------------------

def member_history() -> HistoryBuilder:
    """Sends 1..6 to partition 0 (offsets 0..5); member 4 reads 0..2 in generation 1, is revoked, and in
    generation 2 is assigned partition 0 again from its committed offset 1; member 5 reads 3..4 in generation 2;
    the group's committed offset ends at 5, the drain returns everything."""
    h = HistoryBuilder()
    for o in range(6):
        h.send(0, o + 1, 0, offset=o)
    h.op(4, "invoke", "subscribe", topic="t")
    h.op(4, "ok", "subscribe", topic="t")
    rebalance(h, 4, "assign", [0], 1)
    h.op(4, "invoke", "poll", topic="t")
    h.op(4, "ok", "poll", topic="t", records=[[0, 0, 1], [0, 1, 2], [0, 2, 3]], generation=1)
    h.op(4, "invoke", "commit", offsets=[[0, 1]])
    h.op(4, "ok", "commit", offsets=[[0, 1]])
    rebalance(h, 4, "revoke", [0], 1)
    rebalance(h, 4, "assign", [0], 2)
    h.op(4, "invoke", "poll", topic="t")  # back to the committed offset: no nonmonotonic_poll across the assign
    h.op(4, "ok", "poll", topic="t", records=[[0, 1, 2], [0, 2, 3]], generation=2)
    h.op(4, "invoke", "commit", offsets=[[0, 3]])
    h.op(4, "fail", "commit", offsets=[[0, 3]], error="REBALANCE_IN_PROGRESS")
    rebalance(h, 4, "revoke", [0], 2, lost=True)
    h.op(5, "invoke", "poll", topic="t")
    h.op(5, "ok", "poll", topic="t", records=[[0, 3, 4], [0, 4, 5]], generation=2)
    h.op(6, "invoke", "committed", topic="t", partition=0)
    h.op(6, "ok", "committed", topic="t", partition=0, offset=5)
    h.drain(6, 0, [(0, o, o + 1) for o in range(6)])
    return h


def rebalance(h: HistoryBuilder, process: int, f: str, partitions: list[int], generation: int, **extra: Any) -> None:
    h.op(process, "invoke", f, topic="t", partitions=partitions, generation=generation, **extra)
    h.op(process, "ok", f, topic="t", partitions=partitions, generation=generation, **extra)


def test_group_ops_are_well_formed_and_an_assign_ends_the_stream(tmp_path):
    h = member_history()
    convert(h.write(tmp_path / "run") / "history.jsonl", validate=True)  # no malformed-history error
    r = check_reference(h.ops, None, max_examples=None)
    assert r["stats"]["malformed_client_ops"] == 0 and r["valid"] is True
    assert r["counts"]["nonmonotonic_poll"] == r["counts"]["poll_skip"] == 0
    # Offset 1 and 2 went to member 4 in generations 1 and 2: an at-least-once re-read, not double consumption.
    assert r["counts"]["double_consumed"] == 0 and r["counts"]["committed_unconsumed"] == 0


def test_a_revoke_does_not_end_the_stream():
    h = HistoryBuilder()
    for o in range(3):
        h.send(0, o + 1, 0, offset=o)
    rebalance(h, 4, "assign", [0], 1)
    h.op(4, "invoke", "poll")
    h.op(4, "ok", "poll", records=[[0, 1, 2]], generation=1)
    rebalance(h, 4, "revoke", [0], 1)
    h.op(4, "invoke", "poll")
    h.op(4, "ok", "poll", records=[[0, 0, 1]], generation=1)
    h.drain(6, 0, [(0, o, o + 1) for o in range(3)])
    assert check_reference(h.ops, None)["examples"]["nonmonotonic_poll"] == [[4, 0, 1, 0]]


# --- the counts, reference and Spark ----------------------------------------------------

def tiny(case: str) -> tuple[HistoryBuilder, dict[str, list]]:
    """A history and the keys of each group kind it must show."""
    h = HistoryBuilder()
    for o in range(4):
        h.send(0, o + 1, 0, offset=o)
    rebalance(h, 4, "assign", [0], 3)
    if case == "committed_unconsumed":
        # The group committed 3; members polled offsets 0 and 2 only: offset 1 was never processed.
        h.op(4, "invoke", "poll")
        h.op(4, "ok", "poll", records=[[0, 0, 1]], generation=3)
        rebalance(h, 4, "assign", [0], 4)
        h.op(4, "invoke", "poll")
        h.op(4, "ok", "poll", records=[[0, 2, 3]], generation=4)
        committed, want = 3, {"committed_unconsumed": [[0, 1]], "double_consumed": []}
    elif case == "double_consumed":
        # Offset 0 to members 4 and 5 in generation 3, offset 1 twice to member 4 in generation 3.
        rebalance(h, 5, "assign", [0], 3)
        for proc, recs in ((4, [[0, 0, 1], [0, 1, 2]]), (5, [[0, 0, 1]]), (4, [[0, 1, 2]])):
            h.op(proc, "invoke", "poll")
            h.op(proc, "ok", "poll", records=recs, generation=3)
        committed, want = 2, {"committed_unconsumed": [], "double_consumed": [[0, 0], [0, 1]]}
    else:  # assigned consumers (no generation) read twice and commit nothing: neither kind
        for proc in (4, 5):
            h.op(proc, "invoke", "poll")
            h.op(proc, "ok", "poll", records=[[0, 0, 1], [0, 1, 2]])
        committed, want = None, {"committed_unconsumed": [], "double_consumed": []}
    if committed is not None:
        h.op(6, "invoke", "committed", partition=0)
        h.op(6, "ok", "committed", partition=0, offset=committed)
    h.drain(6, 0, [(0, o, o + 1) for o in range(4)])
    return h, want


CASES = ("committed_unconsumed", "double_consumed", "assigned")


@pytest.mark.spark
def test_group_counts_reference_and_spark_agree(tmp_path):
    spark_session(MASTER)
    runs = []
    for case in CASES:
        h, want = tiny(case)
        ref = check_reference(h.ops, None, max_examples=None)
        for kind, keys in want.items():
            assert ref["examples"].get(kind, []) == keys, (case, kind)
        runs.append((h, ref))
    paths = [({}, h.write(tmp_path / case) / "history.jsonl") for case, (h, _) in zip(CASES, runs)]
    results = QueueChecker(master=MASTER).check_many(paths)
    for case, (_, ref), r in zip(CASES, runs, results):
        assert r["counts"] == ref["counts"], case
        assert r["examples"] == ref["examples"], case


def test_committed_unconsumed_fails_only_with_sync_commits_and_double_consumed_never():
    results = {"counts": {"acked": 4, "committed_unconsumed": 1, "double_consumed": 2}}
    sync = judge(results, {"workload": {"consumer_mode": "subscribe", "options": {"group_commit": "sync"}}})
    auto = judge(results, {"workload": {"consumer_mode": "subscribe", "options": {"group_commit": "auto"}}})
    assert sync.verdict == "fail" and dict(sync.failed) == {"committed_unconsumed": 1}
    assert dict(sync.allowed) == {"double_consumed": 2}
    assert auto.verdict == "pass" and dict(auto.allowed) == {"committed_unconsumed": 1, "double_consumed": 2}


@pytest.mark.spark
def test_a_layout_written_by_an_older_converter_is_written_again(tmp_path):
    """The bucket layout and the Parquet form are the checker's own cache: one written by another converter
    version (here an older one, whose layout had no generations) is rebuilt, not read."""
    import pyarrow.parquet as pq

    from kchaos.checkers.buckets import bucket_files
    from kchaos.checkers.parquet import CONVERTER_VERSION
    h, _ = tiny("double_consumed")
    history = h.write(tmp_path / "old") / "history.jsonl"
    pq_path = convert(history, validate=False)
    for f in bucket_files(pq_path)[0]:
        pq.write_table(pq.read_table(f).drop_columns(["gen"]), f)
    table = pq.read_table(pq_path)
    meta = {k: v for k, v in (table.schema.metadata or {}).items()}
    key = next(k for k, v in meta.items() if CONVERTER_VERSION.encode() in v and b"version" in v)
    meta[key] = meta[key].replace(f'"version": "{CONVERTER_VERSION}"'.encode(), b'"version": "4"')
    pq.write_table(table.replace_schema_metadata(meta), pq_path)
    convert(history, validate=False)
    assert all("gen" in pq.read_schema(f).names for f in bucket_files(pq_path)[0])
    spark_session(MASTER)
    fresh = h.write(tmp_path / "fresh") / "history.jsonl"
    r, expected = (QueueChecker(master=MASTER).check({}, x) for x in (history, fresh))
    assert r["counts"] == expected["counts"] and r["counts"]["double_consumed"] > 0 and r["counts"]["acked"] == 4


def test_drop_destroys_abandoned_members_whose_callbacks_hold_them():
    """A crashed member's consumer is referenced by its own rebalance callbacks (a cycle); `drop` frees it now,
    without a close: librdkafka's threads for it are gone when drop returns. No broker is needed (loopback:1)."""
    import os

    from kchaos.workloads.clients import make_group_consumer
    from kchaos.workloads.rebalance import drop, subscribe

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    before = threads()
    abandoned = []
    for i in range(2):
        c = make_group_consumer("127.0.0.1:1", f"dropped{i}", "kchaos-drop", auto_commit=False)
        subscribe(c, "t", lambda r: None, live=lambda c=c: c is None)  # the callback holds its consumer
        c.consume(num_messages=1, timeout=0.05)
        abandoned.append(c)
    del c
    assert threads() >= before + 6  # librdkafka's main, broker and internal threads of each
    drop(abandoned)
    assert abandoned == [] and threads() <= before + 1  # + 1: a thread of another test's (py4j) may come and go
