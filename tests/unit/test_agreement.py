"""The agreement checks: brokers' views against the metadata log, in-sync replicas against each other, and how the
verdict weighs them."""
from __future__ import annotations

import json
import struct
from pathlib import Path

from recorded_runs import recorded_run

from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, Judgement, with_agreement
from kchaos.evidence.agreement import (
    Digest,
    agreement,
    agreement_line,
    batch_digests,
    metadata_divergences,
    replica_divergences,
)
from kchaos.evidence.kraft_metadata import replay

T0 = 1_700_000_000_000


def batch(base: int, count: int, payload: bytes = b"x" * 20, epoch: int = 0) -> bytes:
    """A record batch as Kafka writes it (magic 2): the header fields the digest reads, then `payload`."""
    after_crc = struct.pack(">hiqqqhi", 0, count - 1, T0, T0, -1, -1, -1) + struct.pack(">i", count) + payload
    body = struct.pack(">ibI", epoch, 2, 0) + after_crc
    return struct.pack(">qi", base, len(body)) + body


def segment(folder: Path, *batches: bytes, base: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{base:020d}.log").write_bytes(b"".join(batches))
    return folder


def test_digests_read_every_batch_and_stop_at_a_torn_one(tmp_path):
    d = segment(tmp_path / "kchaos-0", batch(0, 3), batch(3, 2), batch(5, 4)[:30])
    got = batch_digests(d)
    assert [(g.base_offset, g.last_offset) for g in got] == [(0, 2), (3, 4)]


def test_the_leader_epoch_a_leader_stamps_is_not_compared_but_every_other_byte_is(tmp_path):
    a = batch_digests(segment(tmp_path / "a", batch(0, 3, epoch=0)))
    b = batch_digests(segment(tmp_path / "b", batch(0, 3, epoch=7)))
    c = batch_digests(segment(tmp_path / "c", batch(0, 3, payload=b"x" * 19 + b"y")))
    assert a == b
    assert a != c


def test_batches_are_read_across_segments_in_offset_order(tmp_path):
    d = segment(tmp_path / "p", batch(4, 2), base=4)
    segment(d, batch(0, 4))
    assert [g.base_offset for g in batch_digests(d)] == [0, 4]


def digests(*spec: tuple[int, int, str]) -> list[Digest]:
    return [Digest(b, last, h) for b, last, h in spec]


def test_replicas_that_hold_the_same_batches_agree():
    same = digests((0, 2, "a"), (3, 5, "b"))
    assert replica_divergences({"n1": same, "n2": list(same), "n3": same + digests((6, 6, "c"))}, 6, "n1") == []


def test_a_replica_whose_batch_differs_below_the_high_watermark_diverges_there():
    leader = digests((0, 2, "a"), (3, 5, "b"), (6, 8, "c"))
    flipped = digests((0, 2, "a"), (3, 5, "B"), (6, 8, "c"))
    out = replica_divergences({"n1": leader, "n2": flipped}, 9, "n1")
    assert out == [{"node": "n2", "reference": "n1", "offset": 3, "missing": False}]


def test_a_difference_above_the_high_watermark_is_not_a_divergence():
    leader = digests((0, 2, "a"), (3, 5, "b"))
    other = digests((0, 2, "a"), (3, 5, "other"))
    assert replica_divergences({"n1": leader, "n2": other}, 3, "n1") == []


def test_a_replica_that_ends_before_the_high_watermark_lacks_records():
    leader = digests((0, 2, "a"), (3, 5, "b"))
    out = replica_divergences({"n1": leader, "n3": digests((0, 2, "a"))}, 6, "n1")
    assert out == [{"node": "n3", "reference": "n1", "offset": 3, "missing": True}]


def test_without_the_leaders_copy_the_first_replica_is_the_reference():
    out = replica_divergences({"n2": digests((0, 0, "a")), "n3": digests((0, 0, "b"))}, 1, "n1")
    assert out == [{"node": "n3", "reference": "n2", "offset": 0, "missing": False}]


def metadata(*changes: dict) -> list[dict]:
    """Metadata records: topic `kchaos` (id t) created with partition 0 on 1, 2, 3 led by 1, then `changes`, one a
    second apart, each a PartitionChangeRecord's data."""
    out = [{"offset": 0, "time_ms": T0, "type": "TOPIC_RECORD", "data": {"name": "kchaos", "topicId": "t"}},
           {"offset": 1, "time_ms": T0, "type": "PARTITION_RECORD",
            "data": {"topicId": "t", "partitionId": 0, "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1,
                     "leaderEpoch": 0, "partitionEpoch": 0}}]
    for i, c in enumerate(changes, 1):
        out.append({"offset": 1 + i, "time_ms": T0 + 1000 * i, "type": "PARTITION_CHANGE_RECORD",
                    "data": {"topicId": "t", "partitionId": 0, **c}})
    return out


def views(at_ms: float, **brokers: tuple[int, list[int]]) -> dict:
    """views.json with each broker seeing partition 0 of `kchaos` as (leader, isr), replicas 1, 2, 3."""
    return {"time_ms": at_ms, "agreed": True, "rounds": 2, "within_s": 60,
            "ids": {"n1": 1, "n2": 2, "n3": 3}, "errors": {},
            "brokers": {n: [{"topic": "kchaos", "partition": 0, "leader": leader, "replicas": [1, 2, 3],
                             "isr": isr}] for n, (leader, isr) in brokers.items()}}


def test_brokers_that_see_what_the_log_says_agree():
    meta = replay(metadata({"leader": 2, "isr": [2, 3]}))
    v = views(T0 + 10_000, n1=(2, [2, 3]), n2=(2, [2, 3]), n3=(2, [3, 2]))
    assert metadata_divergences(v, meta) == ([], [])


def test_a_broker_that_kept_an_old_leader_past_the_grace_diverges_with_both_views():
    meta = replay(metadata({"leader": 2, "isr": [2, 3]}))
    v = views(T0 + 10_000, n1=(1, [1, 2, 3]), n2=(2, [2, 3]), n3=(2, [2, 3]))
    out, _ = metadata_divergences(v, meta)
    assert out == [{"node": "n1", "topic": "kchaos", "partition": 0,
                    "broker": {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]},
                    "controller": {"leader": 2, "leader_epoch": 1, "replicas": [1, 2, 3], "isr": [2, 3],
                                   "elr": None, "offset": 2, "time_ms": T0 + 1000}}]


def test_a_broker_a_moment_behind_the_log_is_not_divergent():
    meta = replay(metadata({"leader": 2, "isr": [2, 3]}))
    assert metadata_divergences(views(T0 + 1500, n1=(1, [1, 2, 3]), n2=(2, [2, 3])), meta)[0] == []


def test_a_view_the_log_never_held_diverges_even_within_the_grace():
    meta = replay(metadata({"leader": 2, "isr": [2, 3]}))
    out, _ = metadata_divergences(views(T0 + 1500, n1=(3, [3])), meta)
    assert [d["node"] for d in out] == ["n1"]


def test_without_the_log_brokers_are_compared_with_most_brokers():
    out, notes = metadata_divergences(views(T0, n1=(1, [1, 2, 3]), n2=(1, [1, 2, 3]), n3=(2, [2])), None)
    assert [(d["node"], d["others"]["leader"]) for d in out] == [("n3", 1)]
    assert notes == ["1 partitions compared between brokers only (no metadata log was decoded)"]


def test_agreement_of_a_run_reads_its_views_and_replicas(tmp_path):
    run = tmp_path
    (run / "evidence").mkdir()
    (run / "evidence" / "views.json").write_text(json.dumps(
        {**views(T0 + 10_000, n1=(2, [2, 3]), n2=(2, [2, 3]), n3=(2, [2, 3])), "high_watermarks": {"0": 5}}))
    raw = run / "evidence" / "raw"
    segment(raw / "n2" / "kchaos-0", batch(0, 3), batch(3, 2))
    segment(raw / "n3" / "kchaos-0", batch(0, 3), batch(3, 2, payload=b"y" * 20))
    segment(raw / "n1" / "kchaos-0", batch(0, 1))  # out of the ISR: not compared
    meta = replay(metadata({"leader": 2, "isr": [2, 3]}))
    out = agreement(run, meta, "kchaos")
    assert (out["metadata_divergence"], out["replica_divergence"], out["partitions_compared"]) == (0, 1, 1)
    assert out["replica_divergences"] == [{"partition": 0, "high_watermark": 5, "node": "n3", "reference": "n2",
                                           "offset": 3, "missing": False}]
    flipped = agreement(run, meta, "kchaos", corrupted={("n3", 0)})
    assert (flipped["replica_divergence"], flipped["allowed_replica_divergence"]) == (0, 1)


def test_a_run_without_views_has_no_agreement_section(tmp_path):
    assert agreement(tmp_path, None, "kchaos") is None


def test_a_replica_divergence_fails_and_a_metadata_divergence_makes_a_passing_run_unknown():
    passed = Judgement(PASS)
    assert with_agreement(passed, {}) is passed
    failed = with_agreement(passed, {"replica_divergence": 2})
    assert (failed.verdict, failed.failed) == (FAIL, {"replica_divergence": 2})
    first = {"node": "n1", "topic": "kchaos", "partition": 0, "broker": {"leader": 1, "isr": [1], "replicas": [1]},
             "controller": {"leader": 2, "isr": [2], "replicas": [1]}}
    unknown = with_agreement(passed, {"metadata_divergence": 1, "metadata_divergences": [first]})
    assert unknown.verdict == UNKNOWN
    assert "n1 sees kchaos-0 as leader 1, ISR [1]" in unknown.undecided[0]
    allowed = with_agreement(passed, {"allowed_replica_divergence": 1})
    assert (allowed.verdict, allowed.allowed) == (PASS, {"replica_divergence": 1})


FIXTURE = "agreement-3.7.2"


def test_a_real_healthy_run_agrees_with_itself(tmp_path):
    run, meta = recorded_run(tmp_path, FIXTURE)
    out = agreement(run, meta, "kchaos")
    assert (out["metadata_divergence"], out["replica_divergence"], out["partitions_compared"]) == (0, 0, 1)
    assert out["agreed"] is True


def test_a_byte_flipped_in_one_replica_of_a_real_run_is_found_at_its_batch(tmp_path):
    run, meta = recorded_run(tmp_path, FIXTURE)
    seg = run / "evidence" / "raw" / "n3" / "kchaos-1" / "00000000000000000000.log"
    batches = batch_digests(seg.parent)
    target = batches[len(batches) // 2]
    data = bytearray(seg.read_bytes())
    pos = 0
    while struct.unpack_from(">q", data, pos)[0] != target.base_offset:
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
    data[end - 3] ^= 0x01  # a bit of the batch's last record
    seg.write_bytes(bytes(data))
    out = agreement(run, meta, "kchaos")
    assert out["replica_divergence"] == 1
    assert out["replica_divergences"][0] | {"reference": None} == {
        "partition": 1, "high_watermark": 677, "node": "n3", "reference": None, "offset": target.base_offset,
        "missing": False}
    assert with_agreement(Judgement(PASS), out).verdict == FAIL


def test_a_broker_view_planted_against_a_real_metadata_log_is_a_divergence(tmp_path):
    run, meta = recorded_run(tmp_path, FIXTURE)
    path = run / "evidence" / "views.json"
    views_ = json.loads(path.read_text())
    row = next(r for r in views_["brokers"]["n2"] if r["topic"] == "kchaos" and r["partition"] == 1)
    row["leader"], row["isr"] = 3, [3]
    path.write_text(json.dumps(views_))
    out = agreement(run, meta, "kchaos")
    assert out["metadata_divergence"] == 1
    d = out["metadata_divergences"][0]
    assert (d["node"], d["topic"], d["partition"], d["broker"]["leader"]) == ("n2", "kchaos", 1, 3)
    assert (d["controller"]["leader"], d["controller"]["isr"]) == (1, [1, 2, 3])
    assert with_agreement(Judgement(PASS), out).verdict == UNKNOWN


def test_the_reports_sentence_says_whether_the_cluster_agreed():
    assert agreement_line({"metadata_divergence": 0, "replica_divergence": 0, "partitions_compared": 3}) == (
        "The cluster agreed with itself at the end: every broker's view of the partitions was the controllers', and "
        "the in-sync replicas of 3 partitions held the same batches below the high watermark")
    line = agreement_line({"metadata_divergence": 1, "replica_divergence": 1, "partitions_compared": 3,
                           "metadata_divergences": [{"node": "n1", "topic": "kchaos", "partition": 2}],
                           "replica_divergences": [{"node": "n3", "partition": 1, "offset": 40}]})
    assert line == ("The cluster did not agree with itself at the end: 1 broker view of a partition differed from "
                    "the controllers' after the recovery time (first: n1 on kchaos-2); 1 in-sync replica held other "
                    "batches than the leader below the high watermark (first: n3 on partition 1 from offset 40)")


def test_a_broker_that_never_took_the_leadership_its_metadata_cache_shows_is_a_divergence(tmp_path):
    # Kafka 3.7.2, a txn run in which n2 logged "Encountered metadata publishing fault": every broker's Metadata
    # answer has n2 leading __transaction_state-31 at epoch 2 (the views agree), while n2's state-change log has it
    # still a follower at epoch 1: its replica manager never applied the delta.
    run, meta = recorded_run(tmp_path, "publishing-fault-3.7.2")
    views_only, _ = metadata_divergences(json.loads((run / "evidence" / "views.json").read_text()), meta)
    assert views_only == []
    out = agreement(run, meta, "kchaos")
    assert out["metadata_divergence"] == 1
    d = out["metadata_divergences"][0]
    assert (d["node"], d["topic"], d["partition"], d["acts"]) == (
        "n2", "__transaction_state", 31, {"role": "follower", "leader_epoch": 1})
    assert (d["controller"]["leader"], d["controller"]["leader_epoch"], d["controller"]["isr"]) == (2, 2, [2])
    judged = with_agreement(Judgement(PASS), out)
    assert judged.verdict == UNKNOWN
    assert "n2 acts as follower of __transaction_state-31 at leader epoch 1" in judged.undecided[0]
    # Had n2 logged taking the leadership, nothing would diverge.
    log = run / "nodes" / "n2" / "state-change.log"
    log.write_text(log.read_text() + "[2026-11-30 18:56:50,200] INFO [Broker id=2] Leader __transaction_state-31 with "
                   "topic id NP4twfmBSROfZ8c56zM9Mw starts at leader epoch 2 from offset 0 with partition epoch 2, "
                   "high watermark 0, ISR [2], adding replicas [] and removing replicas []. (state.change.logger)\n")
    assert agreement(run, meta, "kchaos")["metadata_divergence"] == 0
