"""The control plane's timeline: Raft leadership, the active controller, broker registration and fencing, read
from real Kafka 3.7.2 server.log lines (tests/unit/data/evidence/control-*/, cut from real runs) and the
metadata log, on the history's clock; and its place in report.html's Evidence section."""
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from kchaos.evidence.broker_logs import ControlEvent, parse_control_lines, read_control_logs
from kchaos.evidence.control_plane import CONTROL_FILE, control_rows, control_timeline
from kchaos.evidence.decode import Clock
from kchaos.evidence.explain.lost import load_explanation
from kchaos.reports.run.evidence_html import evidence_section

DATA = Path(__file__).parent / "data" / "evidence"
# rolling-power-loss-no-quorum, controllers-stopped: c1-c3 paused, n1-n3 power-failed
DEDICATED = DATA / "control-3.7.2"
COMBINED = DATA / "control-combined-3.7.2"  # combined-mode n1-n3 under partition-leader, slow-follower, power-fail
COMBINED_START_MS = 1795508323690.936  # that run's test.json history_start_unix_ms


@pytest.fixture
def dedicated(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(DEDICATED, run)
    return run


def _rows(run: Path) -> list[dict]:
    return control_timeline(run, load_explanation(run))["rows"]


# --- parsing server.log --------------------------------------------------------------------------

def test_registration_refusals_and_successes_are_read_from_each_brokers_own_log():
    events = read_control_logs(DEDICATED / "nodes")
    refused = Counter(e.node for e in events if e.kind == "registration-refused")
    assert refused == {"n1": 1, "n2": 3, "n3": 7}
    assert {e.detail for e in events if e.kind == "registration-refused"} == {"DUPLICATE_BROKER_REGISTRATION"}
    registered = {n: [e.epoch for e in events if e.kind == "registered" and e.node == n] for n in ("n1", "n2", "n3")}
    assert registered == {"n1": [11, 95], "n2": [13, 76], "n3": [10, 97]}
    assert Counter(e.node for e in events if e.kind == "broker-starting") == {"n1": 2, "n2": 2, "n3": 2}
    unsent = [e for e in events if e.kind == "registration-failed"]
    assert len(unsent) == 11 and {e.detail for e in unsent} == {"the RPC got timed out before it could be sent"}
    # The controller's side of the same refusals: c2, active from epoch 3, refused all 11.
    assert Counter((e.node, e.detail) for e in events if e.kind == "controller-refused") == {
        ("c2", "DuplicateBrokerRegistrationException"): 11}
    assert events == sorted(events, key=lambda e: e.time_ms)


def test_raft_leadership_and_the_active_controller_come_from_the_controllers_logs():
    events = read_control_logs(DEDICATED / "nodes")
    lead = [(e.node, e.kind, e.epoch, e.offset) for e in events
            if e.kind in ("raft-leader", "controller-active", "raft-resigned", "controller-renounced")]
    assert lead == [("c1", "raft-leader", 2, 0), ("c1", "controller-active", 2, 1),
                    ("c1", "raft-resigned", 2, None), ("c1", "controller-renounced", 2, None),
                    ("c2", "raft-leader", 3, 53), ("c2", "controller-active", 3, 54)]
    assert [(e.node, e.epoch) for e in events if e.kind == "raft-candidate"] == [
        ("c1", 1), ("c1", 2), ("c3", 1), ("c2", 3), ("c3", 3)]
    assert [(e.node, e.broker, e.detail) for e in events if e.kind == "controller-fencing"] == [
        ("c1", 1, "its session has timed out"), ("c2", 1, "its session has timed out"),
        ("c2", 3, "its session has timed out")]
    # Followers, observers, "In the new epoch" and the lifecycle's RECOVERY/RUNNING lines are not events.
    assert not any(e.node.startswith("n") and e.kind.startswith(("raft-", "controller-")) for e in events)


def test_a_leader_unseated_by_a_newer_epoch_and_both_renounce_wordings():
    events = read_control_logs(COMBINED / "nodes")
    kinds = [(e.node, e.kind, e.epoch) for e in events]
    # n3 led epoch 3 until it saw epoch 5 (Leader -> Unattached), and renounced "due to a metadata log event".
    assert ("n3", "raft-unseated", 3) in kinds and ("n3", "controller-renounced", 3) in kinds
    # n1 resigned epoch 1, then its late activation failed: "... at epoch 1 in N microseconds. Renouncing leadership".
    assert kinds.index(("n1", "raft-resigned", 1)) < kinds.index(("n1", "controller-renounced", 1))
    # Standby controllers answer NotControllerException to forwarded registrations: that is not a refusal.
    assert Counter(e.detail for e in events if e.kind == "controller-refused") == {
        "DuplicateBrokerRegistrationException": 5}
    assert [(e.node, e.epoch) for e in events if e.kind == "raft-leader"] == [("n3", 3), ("n3", 7), ("n1", 9),
                                                                              ("n1", 14)]
    assert [e.epoch for e in events if e.kind == "raft-candidate" and e.node == "n1"] == [2, 3, 4, 5, 6, 8, 9, 14]


def test_a_line_is_read_in_utc_and_lines_without_a_timestamp_or_match_are_ignored():
    lines = [
        "[2026-11-24 08:23:42,500] INFO [BrokerLifecycleManager id=1] Unable to register broker 1 because the "
        "controller returned error DUPLICATE_BROKER_REGISTRATION (kafka.server.BrokerLifecycleManager)\n",
        "Unable to register broker 1 because the controller returned error DUPLICATE_BROKER_REGISTRATION\n",
        "[2026-11-24 08:23:51,900] INFO [BrokerLifecycleManager id=1] The broker has been unfenced. Transitioning "
        "from RECOVERY to RUNNING. (kafka.server.BrokerLifecycleManager)\n",
        "[2026-11-24 08:23:38,729] INFO [QuorumController id=101] In the new epoch 3, the leader is 102. "
        "(org.apache.kafka.controller.QuorumController)\n"]
    [e] = parse_control_lines("n1", lines)
    assert (e.kind, e.detail, e.time_ms) == ("registration-refused", "DUPLICATE_BROKER_REGISTRATION",
                                             1795508622500)


def test_kafka_4_1_state_formats_parse_like_3_7():
    # Built from 4.1.0's format strings (LeaderState, CandidateState, ReplicationControlManager); no 4.1 run with
    # these lines has been recorded yet.
    lines = [
        "[2026-11-24 08:00:01,000] INFO [RaftManager id=1] Completed transition to Leader(localVoterNode=VoterNode("
        "voterKey=ReplicaKey(id=1, directoryId=Optional[abc]), listeners=Endpoints(endpoints={}), "
        "supportedKRaftVersion=SupportedVersionRange[min_version:0, max_version:1]), epoch=5, epochStartOffset=40, "
        "highWatermark=Optional.empty, voterStates={}) from CandidateState(localId=1, localDirectoryId=abc, epoch=5, "
        "epochElection=x, highWatermark=Optional.empty, electionTimeoutMs=1000) (org.apache.kafka.raft.QuorumState)",
        "[2026-11-24 08:00:00,000] INFO [RaftManager id=1] Completed transition to CandidateState(localId=1, "
        "localDirectoryId=abc, epoch=5, epochElection=x, highWatermark=Optional.empty, electionTimeoutMs=1000) from "
        "ProspectiveState(epoch=4, leaderId=OptionalInt.empty, votedKey=Optional.empty, epochElection=x, "
        "electionTimeoutMs=1000, highWatermark=Optional.empty) (org.apache.kafka.raft.QuorumState)",
        "[2026-11-24 08:00:02,000] INFO [QuorumController id=1] Fencing broker 2 at epoch 17 because its session has "
        "timed out. (org.apache.kafka.controller.ReplicationControlManager)"]
    got = [(e.kind, e.epoch, e.offset, e.broker, e.detail) for e in parse_control_lines("n1", lines)]
    assert got == [("raft-leader", 5, 40, None, None), ("raft-candidate", 5, None, None, None),
                   ("controller-fencing", 17, None, 2, "its session has timed out")]


# --- the timeline --------------------------------------------------------------------------------

def test_repeated_refusals_fold_into_one_row_with_count_and_first_and_last_time(dedicated):
    rows = _rows(dedicated)
    refused = {r["node"]: (r["count"], r["time_s"], r["last_s"], r["what"]) for r in rows
               if r["kind"] == "registration-refused"}
    assert refused == {"n1": (1, 79.16, None, "registration refused (DUPLICATE_BROKER_REGISTRATION)"),
                       "n2": (3, 75.44, 80.29, "registration refused ×3 (DUPLICATE_BROKER_REGISTRATION)"),
                       "n3": (7, 75.657, 82.126, "registration refused ×7 (DUPLICATE_BROKER_REGISTRATION)")}
    [c2] = [r for r in rows if r["kind"] == "controller-refused"]
    assert (c2["node"], c2["count"], c2["time_s"], c2["last_s"]) == ("c2", 11, 75.434, 82.124)
    # n1's registration attempts before the quorum was back never got sent: one row for its seven.
    [n1] = [r for r in rows if r["kind"] == "registration-failed" and r["node"] == "n1"]
    assert (n1["count"], n1["time_s"], n1["last_s"]) == (7, 39.386, 72.812)
    assert [r["time_s"] for r in rows] == sorted(r["time_s"] for r in rows)


def test_leadership_rows_say_who_led_which_epoch(dedicated):
    lead = [(r["time_s"], r["node"], r["what"]) for r in _rows(dedicated)
            if r["role"] == "controller" and r["kind"] not in ("controller-refused", "controller-fencing")]
    assert lead == [
        (11.095, "c1", "stood for Raft election ×2, epochs 1–2"),
        (12.654, "c1", "became Raft leader and the active controller, epoch 2"),
        (13.167, "c3", "stood for Raft election, epoch 1"),
        (75.11, "c1", "resigned as Raft leader and active controller, epoch 2"),
        (75.312, "c2", "stood for Raft election, epoch 3"),
        (75.331, "c2", "became Raft leader and the active controller, epoch 3"),
        (75.413, "c3", "stood for Raft election, epoch 3")]  # not folded with epoch 1: not the next epoch


def test_fencing_and_the_affected_partitions_come_from_the_metadata_log(dedicated):
    rows = _rows(dedicated)
    meta = [(r["time_s"], r["node"], r["what"]) for r in rows if r["source"] == "metadata log"]
    assert [m for m in meta if m[1] == "p0"] == [
        (17.72, "p0", "created: leader n3, epoch 0, ISR {n3,n1,n2}"),
        (86.663, "p0", "ISR {n3,n1,n2} → {n3,n2}"),
        (86.663, "p0", "leader n3 → none, epoch 1; ISR {n3,n2} → {n2}"),
        (87.083, "p0", "leader none → n2, epoch 2"),
        (88.738, "p0", "ISR {n2} → {n2,n1}"),
        (89.0, "p0", "ISR {n2,n1} → {n2,n1,n3}")]
    assert [m for m in meta if m[2].startswith("fenced")] == [(86.663, "n1", "fenced (broker epoch 11)"),
                                                              (86.663, "n3", "fenced (broker epoch 10)")]
    # Every registration the metadata log records is already in the broker's own log: shown once, from there.
    assert not [m for m in meta if m[2].startswith("registered")]
    assert [(r["time_s"], r["last_s"], r["node"]) for r in rows if r["kind"] == "fault"] == [
        (27.035, 75.358, "c1, c2, c3"), (29.033, 33.129, "n1"), (47.033, 51.09, "n2"), (65.034, 69.115, "n3")]


def test_a_registration_missing_from_the_brokers_log_is_taken_from_the_metadata_log(dedicated):
    log = dedicated / "nodes" / "n2" / "server.log"
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True)
                           if "broker epoch 76" not in line))
    rows = _rows(dedicated)
    assert [(r["time_s"], r["source"]) for r in rows if r["node"] == "n2" and r["what"].startswith("registered")
            ] == [(14.73, "server.log"), (86.663, "metadata log")]


def test_a_streak_of_candidacies_ends_at_anything_else_the_node_says():
    rows = control_rows(read_control_logs(COMBINED / "nodes"), [], [], Clock(COMBINED_START_MS, "test.json"),
                        {1: "n1", 2: "n2", 3: "n3"})
    n3 = [(r["count"], r["epoch"], r["last_epoch"]) for r in rows
          if r["node"] == "n3" and r["kind"] == "raft-candidate"]
    # 10-11, then n3's broker restarted (a new incarnation), then 12-13: two rows, not one.
    assert (2, 10, 11) in n3 and (2, 12, 13) in n3
    # n1 stood five times for epochs 2-6 while its registration timed out in between: still one row.
    assert (5, 2, 6) in [(r["count"], r["epoch"], r["last_epoch"]) for r in rows
                         if r["node"] == "n1" and r["kind"] == "raft-candidate"]
    unseated = [(r["node"], r["epoch"], r["what"]) for r in rows if r["kind"].startswith("raft-unseated")]
    assert unseated == [("n3", 3, "lost Raft leadership to a newer epoch and the controller role, epoch 3"),
                        ("n1", 9, "lost Raft leadership to a newer epoch and the controller role, epoch 9")]


def test_what_the_metadata_log_says_about_a_node_does_not_interrupt_its_streak():
    events = [ControlEvent("n1", 1000, "raft-candidate", epoch=2), ControlEvent("n1", 3000, "raft-candidate", epoch=3)]
    fenced = {"type": "broker", "time_s": 2.0, "offset": 9, "broker": 1, "kind": "fenced", "broker_epoch": 6}
    rows = control_rows(events, [fenced], [], Clock(0.0, "test.json"), {1: "n1"})
    assert [(r["time_s"], r["last_s"], r["what"]) for r in rows] == [
        (1.0, 3.0, "stood for Raft election ×2, epochs 2–3"), (2.0, None, "fenced (broker epoch 6)")]
    # ...but anything the node's own log says does.
    rows = control_rows([*events[:1], ControlEvent("n1", 2000, "broker-starting", detail="x"), events[1]], [],
                        [], Clock(0.0, "test.json"), {})
    assert [r["count"] for r in rows] == [1, 1, 1]


def test_no_clock_leaves_times_unknown_but_keeps_the_rows():
    events = [ControlEvent("c1", 1000, "raft-leader", epoch=2), ControlEvent("c1", 2000, "controller-active", epoch=2)]
    [row] = control_rows(events, [], [], Clock(None, "unknown"), {})
    assert (row["time_s"], row["what"]) == (None, "became Raft leader and the active controller, epoch 2")


# --- report.html ---------------------------------------------------------------------------------

def test_the_evidence_section_shows_the_table_after_the_partition_timelines_and_writes_control_json(dedicated):
    html = "\n".join(evidence_section(dedicated, load_explanation(dedicated)))
    assert html.index("<h3>Partition 0: leader") < html.index("<h3>Control plane:")
    assert "registration refused ×7 (DUPLICATE_BROKER_REGISTRATION)" in html and "75.7–82.1" in html
    assert '<a href="nodes/n3/server.log">server.log</a>' in html and 'href="evidence/control.json"' in html
    saved = json.loads((dedicated / "evidence" / CONTROL_FILE).read_text())
    assert saved["partitions"] == [0] and saved["clock"]["source"] == "test.json" and saved["notes"] == []
    assert saved["rows"] == _rows(dedicated)


def test_missing_metadata_and_logs_are_said(dedicated):
    (dedicated / "evidence" / "metadata.jsonl").unlink()
    shutil.rmtree(dedicated / "nodes" / "c3")
    (dedicated / "nodes" / "c3").mkdir()
    out = control_timeline(dedicated, load_explanation(dedicated))
    assert out["notes"] == ["no readable evidence/metadata.jsonl: no fencing or partition rows",
                            "no server.log for c3"]
    assert not [r for r in out["rows"] if r["source"] == "metadata log" or r["node"] == "c3"]
    assert any(r["kind"] == "registration-refused" for r in out["rows"])
