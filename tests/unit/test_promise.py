"""Kafka's guarantee applied write by write (checkers/verdict/promise.py), for the cases docs/promise.md lists."""
from __future__ import annotations

import json

import pytest

from kchaos.checkers.parquet import convert
from kchaos.checkers.verdict.promise import (
    Events,
    IsrSample,
    PowerLoss,
    UncleanElection,
    classify,
    verdict,
)
from kchaos.checkers.verdict.promise_run import (
    controller_unclean_elections,
    loss_section,
    nemesis_events,
    read_fenced,
    read_metadata_samples,
)
from kchaos.core.promise import Promise

S = 1_000_000_000
KAFKA_37 = Promise(acks="all", unclean=False, elr=False, min_insync=2)
KAFKA_41 = Promise(acks="all", unclean=False, elr=True, min_insync=2)


def isr(*samples: tuple[float, int, set[int]]) -> dict[int, list[IsrSample]]:
    """ISR samples of partition 0: (seconds, leader, isr)."""
    return {0: [IsrSample(int(t * S), 0, leader, frozenset(members)) for t, leader, members in samples]}


def power(t: float, *nodes: int) -> PowerLoss:
    return PowerLoss(int(t * S), frozenset(nodes))


# The KIP-966 case: both followers slowed out of the ISR, then the lone leader loses power.
KIP966 = Events(isr=isr((0, 1, {1, 2, 3}), (20, 1, {1}), (45, 1, {1, 2, 3})), power=[power(30, 1)])


def test_kip966_on_kafka_37_is_outside_the_guarantee():
    why = verdict(0, 5 * S, KIP966, KAFKA_37)
    assert why == ("p0: in-sync replicas {n1, n2, n3} at the acknowledgement; {n2, n3} left the ISR at 20.0 s, "
                   "{n1} lost power at 30.0 s; ISR then {n1}: no in-sync replica kept these writes")


def test_kip966_with_eligible_leader_replicas_is_inside():
    # n2 and n3 left an ISR that fell below min.insync=2: eligible leader replicas, they still count.
    assert verdict(0, 5 * S, KIP966, KAFKA_41) is None


def test_elr_only_covers_replicas_removed_below_min_insync():
    ev = Events(isr=isr((0, 1, {1, 2, 3}), (10, 1, {1, 2}), (20, 1, {1})), power=[power(30, 1)])
    assert verdict(0, 5 * S, ev, KAFKA_41) is None  # n2 became eligible; n3 left at ISR size 2 and did not
    assert verdict(0, 5 * S, Events(isr=ev.isr, power=[power(30, 1, 2)]), KAFKA_41) is not None


def test_all_node_power_loss_is_outside():
    ev = Events(isr=isr((0, 1, {1, 2, 3})), power=[power(30, 1, 2, 3)])
    assert verdict(0, 5 * S, ev, KAFKA_37) is not None


def test_one_node_power_loss_with_a_full_isr_is_inside():
    ev = Events(isr=isr((0, 1, {1, 2, 3})), power=[power(30, 1)])
    assert verdict(0, 5 * S, ev, KAFKA_37) is None


def test_a_write_acknowledged_after_the_failure_is_not_touched_by_it():
    ev = Events(isr=isr((0, 1, {1}), (40, 1, {1, 2, 3})), power=[power(30, 1)])
    assert verdict(0, 20 * S, ev, KAFKA_37) is not None
    assert verdict(0, 31 * S, ev, KAFKA_37) is None


def test_a_crash_keeps_the_data_so_a_lone_isr_being_killed_is_inside():
    # No power loss: a killed broker keeps its page cache; losing the write would break the promise.
    ev = Events(isr=isr((0, 1, {1, 2, 3}), (20, 1, {1})))
    assert verdict(0, 5 * S, ev, KAFKA_37) is None


def test_power_failures_one_at_a_time_without_a_resync_are_outside():
    # The controllers could not act: the ISR never changed, and no restarted broker fetched the writes again.
    ev = Events(isr=isr((0, 1, {1, 2, 3})), power=[power(10, 1), power(28, 2), power(46, 3)])
    assert verdict(0, 5 * S, ev, KAFKA_37) == (
        "p0: in-sync replicas {n1, n2, n3} at the acknowledgement; {n1} lost power at 10.0 s, {n2} lost power at "
        "28.0 s, {n3} lost power at 46.0 s; ISR then {n1, n2, n3}: no in-sync replica kept these writes")


def test_a_replica_that_rejoins_the_isr_counts_again():
    ev = Events(isr=isr((0, 1, {1, 2}), (12, 1, {1}), (15, 1, {1, 2})), power=[power(10, 2), power(30, 1)])
    assert verdict(0, 5 * S, ev, KAFKA_37) is None
    stays_out = Events(isr=isr((0, 1, {1, 2}), (12, 1, {1})), power=[power(10, 2), power(30, 1)])
    assert verdict(0, 5 * S, stays_out, KAFKA_37) is not None


def written_back(t: float, **oldest: dict[int, float]) -> PowerLoss:
    """A power failure at t whose lazyfs reported, per node, the oldest write dropped per partition (seconds)."""
    ids = {int(n[1:]): {p: int(s * S) for p, s in parts.items()} for n, parts in oldest.items()}
    return PowerLoss(int(t * S), frozenset(ids), ids)


def test_a_holder_leaving_the_isr_ends_the_guarantee_even_without_a_later_power_loss():
    # p2 offset 250 of the seed-11 `writeback-30` run, as its metadata log and nemesis lines have it: acked at 58.6 s
    # by n3 with ISR {n3, n2}; n3 lost power at 61.0 s (and the write, 2.4 s old); at 76.5 s the controller
    # fenced n2 and left the ISR {n3}; n2 lost power at 77.6 s. From 76.5 s no in-sync replica held the write:
    # it was lost outside the guarantee. The checker used to wait for a power failure to empty the holders, so
    # it missed this and counted the write inside the promise.
    ev = Events(isr={2: [IsrSample(int(40 * S), 2, 3, frozenset({2, 3})),
                         IsrSample(int(76.5 * S), 2, 3, frozenset({3}))]},
                power=[power(61.0, 3), power(77.6, 2)])
    assert verdict(2, int(58.6 * S), ev, KAFKA_37) == (
        "p2: in-sync replicas {n2, n3} at the acknowledgement; {n3} lost power at 61.0 s, {n2} left the ISR at "
        "76.5 s; ISR then {n3}: no in-sync replica kept these writes")


def test_a_replica_that_loses_power_after_the_writeback_age_still_holds_the_write():
    # 30 s writeback: n1 power-fails 40 s after the write, and lazyfs reports that the oldest write it dropped
    # from p0's log was 30 s old. The write was on disk: n1, alone in the ISR, still counts.
    ev = Events(isr=isr((0, 1, {1, 2, 3}), (2, 1, {1})), power=[written_back(41, n1={0: 11})])
    assert verdict(0, 1 * S, ev, KAFKA_37) is None
    assert verdict(0, 12 * S, ev, KAFKA_37) == (
        "p0: in-sync replicas {n1} at the acknowledgement; {n1} lost power at 41.0 s; ISR then {n1}: "
        "no in-sync replica kept these writes")
    # a node whose report names no dirty log of p0 kept all of p0; other partitions' drops do not matter
    assert verdict(0, 12 * S, Events(isr=ev.isr, power=[written_back(41, n1={1: 0})]), KAFKA_37) is None


def test_a_joiner_holds_the_write_from_when_it_joined():
    # n2 caught up and joined at 20 s; its power failure drops what it wrote from 15 s: it had the 5 s write by
    # 20 s, so it may have written it at 15-20 s, and it is not credited with keeping it.
    ev = Events(isr=isr((0, 1, {1}), (20, 1, {1, 2})), power=[power(25, 1), written_back(40, n2={0: 15})])
    assert verdict(0, 5 * S, ev, KAFKA_37) is not None
    ev = Events(isr=ev.isr, power=[power(25, 1), written_back(40, n2={0: 21})])
    assert verdict(0, 5 * S, ev, KAFKA_37) is None


def test_a_fenced_holder_with_the_data_on_disk_does_not_count():
    # p0 of the seed-11 run with a 30 s writeback: acked 11.4-18.9 s with ISR {n1, n2, n3}; n1 and n2 lost power
    # (and the writes) at 21.3 and 32.1 s; n3 lost power at 61.0 s with the writes already written back. At
    # 76.5 s the controller fenced n3 (its re-registration refused) and left ISR {n1}, whose log was empty:
    # Kafka had removed the one replica that held the writes from the ISR. docs/promise.md: outside.
    ev = Events(isr=isr((0, 1, {1, 2, 3}), (76.5, 1, {1})),
                power=[written_back(21.3, n1={0: 0}), written_back(32.1, n2={0: 3}), written_back(61.0, n3={0: 31})])
    assert verdict(0, int(15 * S), ev, KAFKA_37) == (
        "p0: in-sync replicas {n1, n2, n3} at the acknowledgement; {n1} lost power at 21.3 s, {n2} lost power at "
        "32.1 s, {n3} lost power at 61.0 s and kept them (written back before it), {n3} left the ISR at 76.5 s; "
        "ISR then {n1}: no in-sync replica kept these writes")


def test_unclean_election_is_outside():
    ev = Events(isr=isr((0, 1, {1, 2, 3})), unclean=[UncleanElection(int(30 * S), 0)])
    assert "unclean election" in verdict(0, 5 * S, ev, KAFKA_37)
    assert verdict(1, 5 * S, ev, KAFKA_37) is None  # another partition's election


def test_acks_1_promises_nothing():
    rules = Promise.of({"producer": {"acks": "1"}, "topic": {"min_insync": 2}})
    out = classify([(1, 0, 5 * S), (2, 0, 6 * S)], Events(isr=isr((0, 1, {1, 2, 3}))), rules, total_lost=2)
    assert (out["promised"], out["lost_in_promise"], out["lost_outside_promise"], out["broken"]) == (False, 0, 2,
                                                                                                      False)
    assert Promise.of({"producer": {"acks": "1"}}).text == "none"


def test_min_insync_1_is_covered_too():
    # The guarantee does not depend on min.insync.replicas: acks=all with min.insync=1 is covered.
    assert Promise.of({"producer": {"acks": "all"}, "topic": {"min_insync": 1}}).no_loss
    assert Promise.of({"producer": {"acks": "all"}, "topic": {"min_insync": 1}}).text == "no loss"


def test_unclean_config_promises_nothing():
    assert Promise.of({"topic": {"unclean": True}}).text == "none: unclean leader election is configured"


def test_elr_is_on_from_kafka_41():
    assert not Promise.of({"cluster": {"kafka_version": "3.7.2"}}).elr
    assert not Promise.of({"versions": {"kafka": "4.0.0"}}).elr
    assert Promise.of({"versions": {"kafka": "4.1.0"}}).elr


def test_classify_counts_and_groups_reasons():
    lost = [(v, 0, int((5 + v / 10) * S)) for v in range(10)] + [(99, 0, 35 * S), (100, None, None)]
    out = classify(lost, KIP966, KAFKA_37, total_lost=13)
    assert out["lost_outside_promise"] == 10
    assert out["lost_in_promise"] == 3  # acked after the failure, one without an ack, one not listed
    assert out["unplaced"] == 2 and out["broken"] is True
    (reason,) = out["outside"]
    assert reason["count"] == 10 and reason["first_acked_s"] == 5.0 and reason["last_acked_s"] == 5.9


def test_nemesis_lines_power_loss_and_flushed_nodes():
    lines = [{"process": "nemesis", "type": "ok", "f": "power-fail", "time": 30 * S, "nodes": ["n1", "n2"],
              "lost": {"n1": {"unsynced_bytes": 4096}, "n2": {"unsynced_bytes": 0}}},
             {"process": "nemesis", "type": "invoke", "f": "power-fail", "time": 29 * S},
             {"process": "nemesis", "type": "ok", "f": "elect-unclean", "time": 40 * S, "partition": 2}]
    (p,), (u,) = nemesis_events(lines)
    assert p.dropped == frozenset({1})  # n2's failure dropped nothing: it had fsynced
    assert (u.partition, u.time) == (2, 40 * S)


def test_nemesis_lines_per_file_report_places_the_oldest_dropped_write():
    files = [{"path": "kchaos-0/00000000000000000000.log", "oldest_unix_ms": 1_000_020_000.0, "oldest_age_ms": 10_000},
             {"path": "kchaos-0/00000000000000000000.index", "oldest_unix_ms": 1_000_001_000.0,
              "oldest_age_ms": 29_000},
             {"path": "kchaos-1/00000000000000000000.log", "oldest_unix_ms": 1_000_025_000.0, "oldest_age_ms": 5_000},
             {"path": "other-0/00000000000000000000.log", "oldest_unix_ms": 1_000_000_000.0, "oldest_age_ms": 30_000}]
    lines = [{"process": "nemesis", "type": "ok", "f": "power-fail", "time": 30 * S + 5, "nodes": ["n1", "n2", "n3"],
              "lost": {"n1": {"unsynced_bytes": 8192, "files": files}, "n2": {"unsynced_bytes": 4096},
                       "n3": {"unsynced_bytes": 4096, "files": []}}}]
    (p,), _ = nemesis_events(lines, "kchaos", start_unix_ms=1_000_000_000.0)
    assert p.oldest == {1: {0: 20 * S, 1: 25 * S}, 3: {}}  # n2 reported no files: it lost everything unsynced
    assert p.keeps(1, 0, 19 * S) and not p.keeps(1, 0, 20 * S) and p.keeps(1, 2, 29 * S)
    assert not p.keeps(2, 0, 0) and p.keeps(3, 0, 29 * S)
    (p,), _ = nemesis_events(lines, "kchaos")  # no clock: the line's time minus each file's age
    assert p.oldest[1] == {0: 20 * S + 5, 1: 25 * S + 5}


def _line(i: int, t: float, **kw: object) -> str:
    return json.dumps({"index": i, "time": int(t * S), **kw})


def test_loss_section_reads_a_run_directory(tmp_path):
    lines = [_line(0, 1.0, process=0, type="invoke", f="send", topic="t", partition=0, value=1),
             _line(1, 1.1, process=0, type="ok", f="send", topic="t", partition=0, value=1, offset=0),
             _line(2, 3.0, process=0, type="invoke", f="send", topic="t", partition=0, value=2),
             _line(3, 3.1, process=0, type="ok", f="send", topic="t", partition=0, value=2, offset=1),
             _line(4, 2.0, process="nemesis", type="invoke", f="power-fail", nemesis="power-fail"),
             _line(5, 2.0, process="nemesis", type="ok", f="power-fail", nemesis="power-fail", nodes=["n1"],
                   lost={"n1": {"unsynced_bytes": 100}})]
    (tmp_path / "history.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "isr.jsonl").write_text("\n".join(json.dumps(d) for d in [
        {"time": int(0.5 * S), "partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1]},
        {"time": int(0.6 * S), "error": "timed out"},
        {"time": int(2.5 * S), "partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]}]) + "\n")
    results = {"counts": {"lost": 2},
               "timeline": {"anomalies": {"lost": [{"key": 1, "acked_s": 1.1}, {"key": 2, "acked_s": 3.1}]}}}
    test = {"producer": {"acks": "all"}, "topic": {"min_insync": 2}, "cluster": {"kafka_version": "3.7.2"}}
    out = loss_section(tmp_path, convert(tmp_path / "history.jsonl"), test, results)
    # value 1 was acked while the ISR was n1 alone, which then lost power; value 2 came after.
    assert (out["lost_outside_promise"], out["lost_in_promise"], out["broken"]) == (1, 1, True)
    assert out["outside"][0]["first_acked_s"] == 1.1


@pytest.mark.parametrize("acks", ["all", "1"])
def test_loss_section_without_loss_is_empty(tmp_path, acks):
    out = loss_section(tmp_path, tmp_path / "absent.parquet", {"producer": {"acks": acks}}, {"counts": {"lost": 0}})
    assert (out["lost_in_promise"], out["lost_outside_promise"], out["broken"]) == (0, 0, False)


def test_the_metadata_logs_elr_decides_when_present(tmp_path):
    # Kafka 4.1's metadata log names the eligible leader replicas itself: only those keep counting.
    rows = [{"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 0.0, "leader": 1,
             "isr": [1, 2, 3], "elr": []},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 20.0, "leader": 1,
             "isr": [1], "elr": [3]},
            {"type": "partition", "topic": "other", "partition": 0, "time_s": 21.0, "leader": 2, "isr": [2]},
            {"type": "broker", "time_s": 22.0, "broker": 2, "kind": "fenced"}]
    (tmp_path / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{truncated")
    samples = read_metadata_samples(tmp_path / "metadata.jsonl", "kchaos")
    assert [s.isr for s in samples[0]] == [frozenset({1, 2, 3}), frozenset({1})] and samples[0][1].elr == {3}
    ev = Events(isr=samples, power=[power(30, 1)])
    assert verdict(0, 5 * S, ev, KAFKA_41) is None  # n3 is eligible and holds the writes
    assert "{n2} left the ISR at 20.0 s" in verdict(0, 5 * S, Events(isr=samples, power=[power(30, 1, 3)]), KAFKA_41)


def test_a_fenced_holder_is_named_as_fenced_from_the_metadata_log(tmp_path):
    # rolling-power-loss-no-quorum · writeback-30 (2026-11-24, Kafka 3.7.2), its metadata.jsonl rows for p0: the
    # resumed controller registered n2 (an empty log, its ISR membership from before its power failure), fenced
    # n1 and n3 in the same batch, and elected n2. n3 had the writes on disk (its power failure at 67.0 s dropped
    # p0's writes from 51.7 s only).
    rows = [{"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 19.551, "leader": 3, "isr": [3, 1, 2]},
            {"type": "broker", "time_s": 89.162, "broker": 2, "kind": "registered"},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 89.162, "leader": 3, "isr": [3, 2]},
            {"type": "broker", "time_s": 89.162, "broker": 1, "kind": "fenced"},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 89.162, "leader": -1, "isr": [2]},
            {"type": "broker", "time_s": 89.162, "broker": 3, "kind": "fenced"},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 89.586, "leader": 2, "isr": [2]}]
    (tmp_path / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_fenced(tmp_path / "metadata.jsonl") == {(1, int(89.162 * S)), (3, int(89.162 * S))}
    ev = Events(isr=read_metadata_samples(tmp_path / "metadata.jsonl", "kchaos"),
                power=[written_back(31.3, n1={0: 20.5}), written_back(49.0, n2={0: 20.9}),
                       written_back(67.0, n3={0: 51.7})],
                fenced=read_fenced(tmp_path / "metadata.jsonl"))
    assert verdict(0, int(25 * S), ev, KAFKA_37) == (
        "p0: in-sync replicas {n1, n2, n3} at the acknowledgement; {n1} lost power at 31.3 s, {n2} lost power at "
        "49.0 s, {n3} lost power at 67.0 s and kept them (written back before it), {n3} left the ISR at 89.2 s "
        "(fenced); ISR then {n2}: no in-sync replica kept these writes")


def test_kafka_41_elects_its_last_known_leader_uncleanly_while_an_eligible_replica_holds_the_writes(tmp_path):
    # rolling-power-loss-no-quorum · kafka-4.1-writeback-30 (2026-11-24, Kafka 4.1.0), p0's metadata.jsonl rows:
    # every broker fenced at 90.8 s (n3, the one that kept the writes on disk, left an ISR below min.insync=2 and
    # became eligible); n2 re-registered after an unclean shutdown and left the ELR; at 91.6 s n3 re-registered,
    # left the ELR too, and the controller elected n2, its last known leader, in a RECOVERING (unclean) change.
    rows = [{"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 25.0, "leader": 2, "isr": [2, 3, 1],
             "elr": [], "recovering": False},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 90.814, "leader": 2, "isr": [2, 3],
             "elr": [], "recovering": False},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 90.814, "leader": 2, "isr": [2],
             "elr": [3], "recovering": False},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 90.814, "leader": -1, "isr": [],
             "elr": [2, 3], "recovering": False},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 91.102, "leader": -1, "isr": [],
             "elr": [3], "recovering": False},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 91.605, "leader": 2, "isr": [2],
             "elr": [], "recovering": True},
            {"type": "partition", "topic": "kchaos", "partition": 0, "time_s": 92.334, "leader": 2, "isr": [2, 3],
             "elr": [], "recovering": False}]
    path = tmp_path / "metadata.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (u,) = controller_unclean_elections(path, "kchaos")
    assert (u.partition, u.time, u.leader, u.by_controller) == (0, int(91.605 * S), 2, True)
    assert controller_unclean_elections(path, "kchaos", [UncleanElection(int(92 * S), 0)]) == []  # an operator's
    ev = Events(isr=read_metadata_samples(path, "kchaos"), unclean=[u],
                power=[written_back(35.6, n1={0: 20}), written_back(53.6, n2={0: 30}), written_back(71.5, n3={})])
    assert verdict(0, int(30 * S), ev, KAFKA_41) == (
        "p0: in-sync replicas {n1, n2, n3} at the acknowledgement; {n1} lost power at 35.6 s, {n2} lost power at "
        "53.6 s, {n3} lost power at 71.5 s and kept them (written back before it); the controller elected {n2} "
        "uncleanly at 91.6 s (ISR and ELR empty: Kafka's last-known-leader rule, with unclean leader election "
        "disabled) while {n3}, in the ELR until then, still held them")


def test_a_replaced_disk_takes_every_write_even_fsynced_and_the_verdict_says_so():
    lines = [{"process": "nemesis", "type": "ok", "f": "wipe", "time": 30 * S, "nodes": ["n2"],
              "wiped": {"n2": "wiped all: /var/lib/kafka/data"}}]
    (p,), _ = nemesis_events(lines)
    assert p.dropped == frozenset({2}) and not p.keeps(2, 0, 0)
    # acked with ISR {n1, n2}; n1 left the ISR at 20 s; n2's disk was replaced at 30 s: no replica kept the write
    ev = Events(isr=isr((0, 0, {1, 2}), (20, 0, {2})), power=[p])
    assert verdict(0, 5 * S, ev, KAFKA_37) == (
        "p0: in-sync replicas {n1, n2} at the acknowledgement; {n1} left the ISR at 20.0 s, {n2} had its disk "
        "replaced at 30.0 s; ISR then {n2}: no in-sync replica kept these writes")
