"""Leader elections from the metadata log, against the controllers' UNCLEAN lines (kchaos.evidence.elections)."""
from __future__ import annotations

from pathlib import Path

from recorded_runs import recorded_run

from kchaos.checkers.verdict.judge import PASS, UNKNOWN, Judgement, with_agreement
from kchaos.evidence.elections import elections, elections_line, elections_section, unclean_labels
from kchaos.evidence.kraft_metadata import replay

T0 = 1_796_000_000_000


def records(*changes: dict) -> list[dict]:
    """Topic `kchaos` (id t) created with partition 0 on 1, 2, 3 led by 1 (partition epoch 0), then `changes`, each a
    PartitionChangeRecord's data (partition epochs 1, 2, ...)."""
    out = [{"offset": 0, "time_ms": T0, "type": "TOPIC_RECORD", "data": {"name": "kchaos", "topicId": "t"}},
           {"offset": 1, "time_ms": T0, "type": "PARTITION_RECORD",
            "data": {"topicId": "t", "partitionId": 0, "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1,
                     "leaderEpoch": 0, "partitionEpoch": 0}}]
    out += [{"offset": 1 + i, "time_ms": T0 + 1000 * i, "type": "PARTITION_CHANGE_RECORD",
             "data": {"topicId": "t", "partitionId": 0, **c}} for i, c in enumerate(changes, 1)]
    return out


def kinds(*changes: dict) -> list[str]:
    return [e.kind for e in elections(replay(records(*changes)))]


def label(node_dir: Path, topic: str, p: int, epochs: tuple[int, int]) -> None:
    node_dir.mkdir(parents=True, exist_ok=True)
    with open(node_dir / "server.log", "a", encoding="utf-8") as fh:
        fh.write(f"[2026-11-30 16:54:33,843] INFO [QuorumController id=2] UNCLEAN partition change for {topic}-{p} "
                 f"with topic ID t: isr: [1] -> [4], leader: 1 -> 4, leaderEpoch: 0 -> 1, partitionEpoch: "
                 f"{epochs[0]} -> {epochs[1]} (org.apache.kafka.controller.ReplicationControlManager)\n")


def test_each_election_gets_its_kind_from_the_states_around_it():
    assert kinds({"leader": 2, "isr": [2, 3]}) == ["isr"]
    assert kinds({"leader": -1, "isr": [], "eligibleLeaderReplicas": [2]}, {"leader": 2, "isr": [2]}) == ["elr"]
    assert kinds({"replicas": [4, 2, 3, 1], "addingReplicas": [4]},
                 {"leader": 4, "replicas": [4, 2, 3], "isr": [2, 3, 4]}) == ["joined"]
    assert kinds({"isr": [1]}, {"leader": 3, "isr": [3], "leaderRecoveryState": 1}) == ["unclean"]
    # Another unclean election while the first leader is still recovering, then that leader back and re-elected.
    assert kinds({"isr": [1]}, {"leader": 3, "isr": [3], "leaderRecoveryState": 1}, {"leader": 2, "isr": [2]},
                 {"leader": -1}, {"leader": 2}) == ["unclean", "unclean", "isr"]
    assert kinds({"isr": [1]}, {"leader": 3}) == ["unmarked"]


def test_a_record_that_keeps_the_leader_or_leaves_none_is_no_election():
    assert kinds({"isr": [1, 2]}, {"leader": -1}, {"leader": 1, "isr": [1, 2]}) == ["isr"]
    assert kinds({"leader": 1}) == []


def test_a_controllers_unclean_line_is_matched_to_its_record_once_however_many_controllers_logged_it(tmp_path):
    for node in ("n1", "n2", "n3"):
        label(tmp_path / node, "kchaos", 0, (1, 2))
    label(tmp_path / "n1", "kchaos", 0, (7, 8))  # a record this log does not hold
    assert unclean_labels(tmp_path) == {("kchaos", 0, 2), ("kchaos", 0, 8)}
    meta = replay(records({"replicas": [4, 2, 3, 1]}, {"leader": 4, "replicas": [4, 2, 3], "isr": [2, 3, 4]}))
    out = elections_section(meta, tmp_path, {4: "n4"})
    assert (out["elections"], out["labelled_unclean"], out["mislabelled"], out["unmatched_labels"]) == (1, 1, 1, 1)
    assert out["mislabelled_elections"][0]["leader"] == ["1", "n4"]


def test_an_unmarked_election_makes_a_passing_run_unknown_and_a_mislabelled_one_does_not(tmp_path):
    unmarked = elections_section(replay(records({"isr": [1]}, {"leader": 3})), tmp_path, {})
    judged = with_agreement(Judgement(PASS), {"elections": unmarked})
    assert judged.verdict == UNKNOWN and "unmarked election" in judged.undecided[0]
    label(tmp_path / "n1", "kchaos", 0, (0, 1))
    mislabelled = elections_section(replay(records({"leader": 4, "replicas": [4, 2, 3], "isr": [2, 3, 4]})),
                                    tmp_path, {})
    assert mislabelled["mislabelled"] == 1
    assert with_agreement(Judgement(PASS), {"elections": mislabelled}).verdict == PASS


def test_a_real_3_7_reassignment_completion_is_labelled_unclean_and_is_clean_in_the_log(tmp_path):
    run, meta = recorded_run(tmp_path, "elections-3.7.2")
    out = elections_section(meta, run / "nodes", {1: "n1", 2: "n2", 3: "n3", 4: "n4"})
    assert (out["elections"], out["kinds"]["joined"], out["mislabelled"], out["unmatched_labels"]) == (2, 2, 2, 0)
    assert {(e["topic"], e["partition"]) for e in out["mislabelled_elections"]} == {("kchaos", 0),
                                                                                   ("__consumer_offsets", 1)}
    first = out["mislabelled_elections"][0]
    assert (first["leader"], first["isr"]) == (["n3", "n4"], [["n3", "n1", "n2"], ["n1", "n2", "n4"]])
    said = elections_line(out)
    assert said is not None and "2 clean elections as an UNCLEAN partition change" in said and "KAFKA-19212" in said


def test_nothing_is_said_when_the_controllers_and_the_log_agree():
    out = elections_section(replay(records({"leader": 2, "isr": [2, 3]})), Path("/nonexistent"), {})
    assert out["kinds"]["isr"] == 1 and elections_line(out) is None
