"""Membership faults against a real cluster: a broker whose disk is replaced restarts empty with the same id,
fetches its replicas back and rejoins the ISR; a reassignment moves a leader's replica to a broker that held none,
and the replica it adds can be killed mid-move. At the end of each run the brokers agree with the controllers'
metadata log and the in-sync replicas hold the same batches."""
import json
import random
import re
from pathlib import Path

import pytest
from runs import finished_run

from kchaos.core.history import read_history
from kchaos.nemesis.reassign import GROW

pytestmark = pytest.mark.cluster


def test_a_follower_whose_disk_is_replaced_restarts_empty_with_its_id_and_catches_up(store):
    run, results = finished_run(store, "wipe-follower", [
        "--acks", "all", "--min-insync", "2", "--nemesis", "wipe:follower", "--interval", "12",
        "--time-limit", "30", "--rate", "100", "--seed", "3"])
    assert results["counts"]["lost"] == 0, results["counts"]
    ops = [o for o in read_history(run / "history.jsonl") if o.get("process") == "nemesis" and o["type"] == "ok"]
    wipes = [o for o in ops if o["f"] == "wipe"]
    assert wipes, ops
    for w in wipes:
        (node,) = w["nodes"]
        # a combined node's logs are gone, its metadata log kept; and it starts again at the mend
        assert w["wiped"] == {node: "wiped data: /var/lib/kafka/data"}, w
        assert any(o["f"] == "start" and o["nodes"] == [node] and o["time"] > w["time"] for o in ops), ops
    wiped = {w["nodes"][0] for w in wipes}
    for node in wiped:
        # each start of the wiped node loaded no log: it came back empty, each time as the same node.id
        log = (run / "nodes" / node / "server.log").read_text()
        loaded = re.findall(r"INFO Loaded (\d+) logs in", log)
        times = sum(1 for w in wipes if w["nodes"] == [node])
        assert loaded[-times:] == ["0"] * times, loaded
        assert re.search(rf"^node\.id={node[1:]}$", (run / "nodes" / node / "server.properties").read_text(), re.M)
    # it caught up: back in every partition's ISR, holding what the leader holds below the high watermark
    views = json.loads((run / "evidence" / "views.json").read_text())
    ids = views["ids"]
    for rows in views["brokers"].values():
        for r in rows:
            if r["topic"] == "kchaos":
                assert {ids[n] for n in wiped} <= set(r["isr"]), r
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement
    assert agreement["partitions_compared"] == 3, agreement


def move_pick(outside: int = 1) -> int:
    """A `pick` for which the reassign nemesis moves the target's replica rather than adding one."""
    for pick in range(100):
        r = random.Random(pick)
        r.choice(range(outside))
        if r.random() >= GROW:
            return pick
    raise AssertionError("no pick moves")


def schedule(tmp_path: Path, *ops: tuple[float, str, dict]) -> Path:
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps([{"at": at, "nemesis": spec, "op": op} for at, spec, op in ops]))
    return path


def test_a_reassignment_moves_the_leaders_replica_to_the_broker_that_held_none(store, tmp_path):
    plan = schedule(tmp_path, (8, "reassign", {"f": "reassign", "target": "leader", "partition": 0,
                                               "pick": move_pick()}),
                    (16, "reassign", {"f": "verify"}))
    run, results = finished_run(store, "reassign-leader", [
        "--nodes", "4", "--acks", "all", "--min-insync", "2", "--schedule", str(plan), "--time-limit", "24",
        "--rate", "100", "--seed", "4"])
    assert results["counts"]["lost"] == 0, results["counts"]
    ops = {o["f"]: o for o in read_history(run / "history.jsonl") if o.get("process") == "nemesis"
           and o["type"] == "ok"}
    moved, verified = ops["reassign"], ops["verify"]
    (old_leader,) = moved["targets"]
    assert moved["mode"] == "move" and moved["removing"] == [old_leader] and len(moved["adding"]) == 1, moved
    assert moved["from"][0] == old_leader and moved["to"] == [moved["adding"][0], *moved["from"][1:]], moved
    assert verified["reassignments"] == {"kchaos-0": "completed"}, verified
    # every broker now places partition 0 on the new replicas, all of them in sync
    views = json.loads((run / "evidence" / "views.json").read_text())
    ids = views["ids"]
    for node, rows in views["brokers"].items():
        (p0,) = [r for r in rows if r["topic"] == "kchaos" and r["partition"] == 0]
        assert p0["replicas"] == [ids[n] for n in moved["to"]] and sorted(p0["isr"]) == sorted(p0["replicas"]), node
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement
    # Kafka's ERROR for the replica it creates on the new broker is explained by the reassignment
    groups = (results.get("kafka_errors") or {}).get("groups") or []
    assert all(g["status"] == "expected" for g in groups if g["rule"] == "replica-created"), groups


def test_the_replica_a_throttled_reassignment_adds_is_killed_mid_move_and_nothing_is_lost(store, tmp_path):
    # Kafka's replication quota measures a rate over at least 10 one-second windows, so a move first copies about
    # 10 s of its throttle at once: 500 B/s lets through some 5 kB, and the partition holds several times that.
    plan = schedule(tmp_path, (16, "reassign", {"f": "reassign", "target": "leader", "partition": 0,
                                                "pick": move_pick()}),
                    (17, "kill:adding", {"f": "kill", "target": "adding", "pick": 0}),
                    (23, "kill:adding", {"f": "start"}),
                    (30, "reassign", {"f": "verify"}))
    run, results = finished_run(store, "reassign-kill-adding", [
        "--nodes", "4", "--acks", "all", "--min-insync", "2", "--schedule", str(plan), "--time-limit", "34",
        "--rate", "100", "--seed", "6", "--reassign-throttle", "500"])
    assert results["counts"]["lost"] == 0, results["counts"]
    ops = [o for o in read_history(run / "history.jsonl") if o.get("process") == "nemesis" and o["type"] == "ok"]
    moved = next(o for o in ops if o["f"] == "reassign")
    killed = next(o for o in ops if o["f"] == "kill")
    assert killed["targets"] == moved["adding"] and killed["time"] > moved["time"], (moved, killed)
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement


def test_a_decommissioned_leader_is_drained_to_a_spare_then_unregistered_and_left_out(store, tmp_path):
    plan = schedule(tmp_path, (8, "decommission:leader", {"f": "decommission", "target": "leader", "partition": 0,
                                                          "pick": 1}),
                    (30, "decommission:leader", {"f": "verify"}))
    run, results = finished_run(store, "decommission-leader", [
        "--spares", "1", "--acks", "all", "--min-insync", "2", "--schedule", str(plan), "--time-limit", "36",
        "--rate", "100", "--seed", "9"])
    assert results["counts"]["lost"] == 0, results["counts"]
    op = next(o for o in read_history(run / "history.jsonl") if o.get("process") == "nemesis"
              and o["f"] == "decommission" and o["type"] != "invoke")
    assert op["type"] == "ok", op
    (victim,) = op["targets"]
    # the spare was added to take its replicas, every one of them moved, and then it was unregistered
    assert op["added"] == ["n4"] and op["drained"] is True and op["unregistered"], op
    assert {f"kchaos-{p}" for p in range(3)} <= set(op["moved"]), op
    assert all(victim not in replicas for replicas in op["moved"].values()), op
    # it stayed out: not restarted by the heal, not asked at the end, and no partition places a replica on it
    views = json.loads((run / "evidence" / "views.json").read_text())
    assert set(views["brokers"]) == {"n1", "n2", "n3", "n4"} - {victim}, views["brokers"].keys()
    gone = int(victim[1:])
    assert all(gone not in r["replicas"] for rows in views["brokers"].values() for r in rows), views
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement


def test_the_active_controller_is_removed_from_a_dynamic_quorum_and_added_back_while_brokers_serve(store):
    run, results = finished_run(store, "remove-controller", [
        "--kafka-version", "4.4.0", "--controllers", "3", "--dynamic-quorum", "--nemesis", "remove-controller",
        "--interval", "12", "--time-limit", "30", "--acks", "all", "--min-insync", "2", "--rate", "100",
        "--seed", "2"])
    assert results["counts"]["lost"] == 0, results["counts"]
    test = json.loads((run / "test.json").read_text())
    assert test["cluster"]["dynamic_quorum"] is True
    props = (run / "nodes" / "c1" / "server.properties").read_text()
    assert "controller.quorum.bootstrap.servers=" in props and "controller.quorum.voters=" not in props
    ops = [o for o in read_history(run / "history.jsonl") if o.get("process") == "nemesis" and o["type"] == "ok"]
    removed = [o for o in ops if o["f"] == "remove-controller"]
    added = [o for o in ops if o["f"] == "add-controller"]
    assert removed and len(added) == len(removed), ops
    for r, a in zip(removed, added):
        (node,) = r["targets"]
        cid = 100 + int(node[1:])
        assert r["voters_before"] == ["c1", "c2", "c3"] and node in r["voters_before"], r
        assert r["answer"] == f"Removed KRaft controller {cid} with directory id {r['directory_id']}", r
        assert a["added"][node].startswith(f"Added controller {cid} with directory id {r['directory_id']}"), a
        assert a["voters_after"] == ["c1", "c2", "c3"], a
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement
