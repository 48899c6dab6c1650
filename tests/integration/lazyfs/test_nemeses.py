"""Every fault against one real cluster (on lazyfs, shared by this folder's tests: conftest.py): its effect on
Kafka observed, its heal verified."""
import re
import threading
import time

import pytest
from confluent_kafka import KafkaException, Producer
from shared_cluster import LAZYFS, heal, until

from kchaos import nemesis
from kchaos.clusters import admin
from kchaos.core.config import NemesisConfig, ProducerConfig
from kchaos.core.history import History, read_history
from kchaos.nemesis.driver import NemesisDriver
from kchaos.nemesis.targets import active_controller
from kchaos.workloads.queue.workload import QueueWorkload

CFG = LAZYFS
TOPIC = CFG.topic


# The nemeses the running test made (by `make`): the heal after it undoes theirs. Healing every nemesis after
# every test took 7 s a test (30 teardowns of about 0.25 s); the status check below still catches a rule, a
# qdisc, a CPU or clock loop or a flipped byte a test left behind, whoever made it.
MADE: list[str] = []


def make(cluster, spec, cfg=CFG):
    """Nemesis `spec` on `cluster`, remembered for the heal after the test."""
    MADE.append(spec)
    return nemesis.split(spec)[0].make(cluster, cfg)


@pytest.fixture
def healthy(cluster):
    """The cluster, with every fault of the nemeses the test made healed, every node running and the topic in
    sync again after the test."""
    MADE.clear()
    yield cluster
    heal(cluster, CFG, dict.fromkeys(MADE))
    for n in cluster.nodes:
        status = cluster.fault_ctl(n, "status")
        left = [line for line in status.splitlines()
                if "DROP" in line or "htb" in line or line.startswith(("process cpu-loop", "process clock-loop",
                                                                       "corrupt "))]
        assert not left, f"{n} not healed: {status}"


def play(cluster, spec, op):
    """Apply one op of nemesis `spec` now; return its completion."""
    nem = make(cluster, spec)
    return nem, nem.invoke(op)


def isr(cluster, via, partition):
    """Partition state as the metadata of broker `via` has it."""
    return admin.partitions(f"{cluster.address(via)}:9092", TOPIC.name)[partition]


def produce(cluster, partition, n, acks="all"):
    """Send n small records to `partition` and wait; return how many were acknowledged."""
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": acks, "linger.ms": 5,
                  "logger": admin.CLIENT_LOG})
    acked = []
    for i in range(n):
        p.produce(TOPIC.name, str(i).encode(), partition=partition,
                  on_delivery=lambda err, msg: acked.append(err is None))
        p.poll(0)
    p.flush(30)
    return sum(acked)


class Background:
    """A producer thread sending to every partition until stopped (keeps followers fetching)."""

    def __init__(self, cluster):
        self.p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "1", "linger.ms": 10,
                           "logger": admin.CLIENT_LOG})
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self.stop.is_set():
            self.p.produce(TOPIC.name, b"x" * 200, partition=i % TOPIC.partitions)
            self.p.poll(0)
            i += 1
            time.sleep(0.002)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()
        self.p.flush(10)


def records_on_disk(cluster, node, partition):
    """Records in `node`'s local log of `partition`, counted by kafka.tools.DumpLogSegments."""
    d = f"{cluster.data_dir(node)}/{TOPIC.name}-{partition}"
    code, out = cluster.exec(node, ["sh", "-c", f"ls {d}/*.log | paste -sd,"])
    assert code == 0, out
    code, out = cluster.exec(node, ["kafka-ctl", "tool", "kafka.tools.DumpLogSegments", "--files", out.strip()])
    assert code == 0, out
    return sum(int(m) for m in re.findall(r"\bcount: (\d+)", out))


def test_partition_leader_shrinks_isr_while_the_isolated_leader_still_acknowledges(healthy, tmp_path):
    cfg = CFG.with_(producer=ProducerConfig(acks="1"),
                    nemesis=NemesisConfig(names=("partition-leader",)))
    history = History(tmp_path / "history.jsonl")
    work = QueueWorkload(cfg)
    nem = make(healthy, "partition-leader", cfg)
    driver = NemesisDriver({"partition-leader": nem}, healthy, history, [], cfg.topic.name)
    work.start(healthy, history)
    try:
        time.sleep(2)
        done = driver.apply("partition-leader", {"f": "start-partition", "target": "leader", "partition": 0})
        assert done is not None
        leader = done["targets"][0]
        other = next(n for n in healthy.nodes if n != leader)
        assert set(done["grudge"]) == set(healthy.nodes)
        # The controller fences the isolated leader and shrinks the ISR without it.
        until(lambda: healthy.id_of(leader) not in isr(healthy, other, 0).isr, 40, "ISR shrink")
        time.sleep(3)
        driver.apply("partition-leader", {"f": "stop-partition"})
    finally:
        work.stop()
        history.close()
    ops = list(read_history(tmp_path / "history.jsonl"))
    cut = next(o for o in ops if o["f"] == "start-partition" and o["type"] == "ok")
    healed = next(o for o in ops if o["f"] == "stop-partition" and o["type"] == "invoke")
    during = [o for o in ops if o["f"] == "send" and o["type"] == "ok" and o["partition"] == 0
              and cut["time"] < o["time"] < healed["time"]]
    assert during, "no send to the isolated leader was acknowledged during the partition"


def test_stalled_followers_stay_out_of_the_isr_even_when_writes_stop(healthy):
    """Both followers stalled: the ISR shrinks to the leader and stays so with no writes to catch up on
    (a slow follower would rejoin then); clients still reach every node; mending lets them back in."""
    with Background(healthy):
        nem, done = play(healthy, "stall-follower", {"f": "start-stall", "target": "followers", "partition": 0})
        stalled = done["nodes"]
        leader = healthy.node_of(isr(healthy, stalled[0], 0).leader)
        assert len(stalled) == 2 and leader not in stalled
        assert set(done["stalled_from"][stalled[0]]) == set(healthy.nodes) - {stalled[0]}
        until(lambda: isr(healthy, leader, 0).isr == (healthy.id_of(leader),), 45, "ISR shrinks to the leader")
    # No writes now: nothing left to catch up on, yet no fetch answer reaches them. A follower that is only slow
    # rejoins with its first fetch that reaches the end, and an idle fetch returns every replica.fetch.wait.max.ms
    # (500 ms): 4 s is eight of them.
    for _ in range(4):
        time.sleep(1)
        assert isr(healthy, leader, 0).isr == (healthy.id_of(leader),)
    assert isr(healthy, stalled[0], 0).leader == healthy.id_of(leader)  # clients still reach a stalled node
    assert "--sport 9092" in healthy.fault_ctl(stalled[0], "status")
    nem.invoke({"f": "stop-stall"})
    assert "DROP" not in healthy.fault_ctl(stalled[0], "status")
    until(lambda: len(isr(healthy, leader, 0).isr) == 3, 45, "followers rejoin")


def test_slow_follower_leaves_the_isr_and_rejoins_after_healing(healthy):
    with Background(healthy):
        nem, done = play(healthy, "slow-follower", {"f": "start-slow", "target": "follower", "partition": 0,
                                                    "pick": 1})
        slow = done["nodes"][0]
        leader = healthy.node_of(isr(healthy, slow, 0).leader)
        assert slow != leader
        until(lambda: healthy.id_of(slow) not in isr(healthy, leader, 0).isr,
              45, "follower drops out")
        assert "htb" in healthy.fault_ctl(slow, "status")
        nem.invoke({"f": "stop-slow"})
        assert "htb" not in healthy.fault_ctl(slow, "status")
        until(lambda: healthy.id_of(slow) in isr(healthy, leader, 0).isr,
              45, "follower rejoins")


def test_power_fail_loses_exactly_what_the_node_had_not_fsynced(healthy):
    state = isr(healthy, "n1", 1)
    victim = next(healthy.node_of(r) for r in state.replicas if r != state.leader)
    assert produce(healthy, 1, 300) == 300
    healthy.fault_ctl(victim, "flush")  # everything so far is on the "disk"
    synced = records_on_disk(healthy, victim, 1)
    # acks=all and nothing in flight: the victim holds the partition's whole log, the 300 above included
    assert synced == records_on_disk(healthy, healthy.node_of(state.leader), 1) and synced >= 300
    flushed_ms = time.time() * 1000
    assert produce(healthy, 1, 500) == 500  # acks=all: the victim has these, in memory only
    until(lambda: records_on_disk(healthy, victim, 1) == synced + 500, 20, "")
    nem, done = play(healthy, "power-fail", {"f": "power-fail", "nodes": [victim]})
    assert done["nodes"] == [victim]
    assert done["lost"][victim]["unsynced_bytes"] > 0
    # lazyfs names what it dropped: p1's segment, from a write made after the flush (what came before survives)
    logs = [f for f in done["lost"][victim]["files"] if re.fullmatch(rf"{TOPIC.name}-1/\d+\.log", f["path"] or "")]
    assert len(logs) == 1 and logs[0]["dirty_bytes"] > 0, done["lost"][victim]
    assert flushed_ms - 50 <= logs[0]["oldest_unix_ms"] <= time.time() * 1000, (flushed_ms, logs[0])
    assert not healthy.is_running(victim)
    assert records_on_disk(healthy, victim, 1) == synced  # the 500 unsynced records are gone
    nem.invoke({"f": "start"})
    until(lambda: healthy.id_of(victim) in isr(healthy, victim, 1).isr, 60, "")
    assert records_on_disk(healthy, victim, 1) >= synced + 500  # re-replicated from the leader


def test_pause_longer_than_the_session_timeout_fences_the_node(healthy):
    nem, done = play(healthy, "pause", {"f": "pause", "target": "one", "pick": 5})
    node = done["nodes"][0]
    other = next(n for n in healthy.nodes if n != node)
    until(lambda: healthy.id_of(node) not in admin.registered_brokers(f"{healthy.address(other)}:9092"), 45,
          "fenced")
    nem.invoke({"f": "resume"})
    until(lambda: healthy.id_of(node) in admin.registered_brokers(f"{healthy.address(other)}:9092"), 45,
          "unfenced")


def test_kill_controller_moves_the_quorum_leadership(healthy):
    before = active_controller(healthy)
    nem, done = play(healthy, "kill-controller", {"f": "kill", "target": "controller"})
    assert done["nodes"] == [before]
    until(lambda: active_controller(healthy) != before, 30, "election")
    nem.invoke({"f": "start"})
    assert healthy.is_running(before)


@pytest.mark.parametrize("spec, op", [
    ("partition-halves", {"f": "start-partition", "target": "all", "pick": 1}),
    ("partition-majorities-ring", {"f": "start-partition", "target": "all", "pick": 2}),
    ("partition-bridge", {"f": "start-partition", "target": "all", "pick": 3}),
    ("partition-oneway", {"f": "start-partition", "target": "one", "pick": 4}),
    ("partition-controller", {"f": "start-partition", "target": "controller"}),
    ("flaky", {"f": "start-flaky", "target": "all", "pick": 5}),
])
def test_network_faults_install_their_grudge_and_heal_it(healthy, spec, op):
    nem, done = play(healthy, spec, op)
    for node, srcs in done["grudge"].items():
        rules = healthy.fault_ctl(node, "status")
        for src in srcs:
            assert f"-s {healthy.address(src)}/32" in rules, (node, src, rules)
        assert ("statistic" in rules) == (spec == "flaky")
    nem.teardown()
    assert all("-A KCHAOS" not in healthy.fault_ctl(n, "status") for n in healthy.nodes)


def test_partition_client_cuts_clients_off_one_node_only(healthy):
    nem, done = play(healthy, "partition-client", {"f": "start-partition", "target": "one", "pick": 7})
    node = done["nodes"][0]
    with pytest.raises(KafkaException):
        admin.registered_brokers(f"{healthy.address(node)}:9092", timeout=3)
    other = next(n for n in healthy.nodes if n != node)
    assert healthy.id_of(node) in admin.registered_brokers(f"{healthy.address(other)}:9092")
    nem.invoke({"f": "stop-partition"})
    until(lambda: admin.registered_brokers(f"{healthy.address(node)}:9092"), 20, "reachable")


def test_cpu_starve_caps_and_uncaps_the_container(healthy):
    nem, done = play(healthy, "cpu-starve", {"f": "start-starve", "target": "one", "pick": 1})
    node = done["nodes"][0]
    # cgroup v1 (cpu.cfs_quota_us: "5000" / "-1") or v2 (cpu.max: "5000 100000" / "max 100000")
    read = "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"
    quota = lambda: healthy.exec(node, ["sh", "-c", read])[1].split()[0]  # noqa: E731
    assert quota() == "5000"
    nem.invoke({"f": "stop-starve"})
    assert quota() in ("-1", "max")


def test_slow_disk_delays_writes_on_the_node_until_healed(healthy):
    nem, done = play(healthy, "slow-disk", {"f": "start-slow-disk", "target": "one", "pick": 2})
    node = done["nodes"][0]
    assert '"write_delay_ms": 100' in healthy.fault_ctl(node, "status")
    timed = ("import os, time; t = time.monotonic(); fd = os.open('{f}', os.O_WRONLY | os.O_CREAT)\n"
             "for _ in range(10): os.write(fd, b'x' * 4096)\n"
             "os.close(fd); os.unlink('{f}'); print(time.monotonic() - t)").format(f=f"{healthy.data_dir(node)}/slow")
    code, out = healthy.exec(node, ["python3", "-c", timed])
    assert code == 0 and float(out) >= 0.9, out  # 10 writes of 100 ms each
    nem.invoke({"f": "stop-slow-disk"})
    assert '"write_delay_ms": 0' in healthy.fault_ctl(node, "status")


def test_rolling_restart_restarts_every_node_and_keeps_the_topic_in_sync(healthy):
    starts = lambda n: (healthy.node_dir(n) / "stdout.log").read_text().count("=== start")  # noqa: E731
    before = {n: starts(n) for n in healthy.nodes}
    nem, done = play(healthy, "rolling-restart", {"f": "roll", "pick": 1})
    assert sorted(done["nodes"]) == sorted(healthy.nodes)
    assert all(starts(n) == before[n] + 1 for n in healthy.nodes)
    healthy.wait_topic(TOPIC.name, 3, 10)


def test_faults_on_a_down_node_are_skipped_not_fatal(healthy):
    healthy.kill("n2")
    nem = make(healthy, "pause")
    with pytest.raises(nemesis.FaultSkipped, match="not running"):
        nem.invoke({"f": "pause", "nodes": ["n2"]})
    nem2, done = play(healthy, "partition-one", {"f": "start-partition", "target": "one", "pick": 1})
    assert done["nodes"]  # rules go in even where Kafka is down
    nem2.teardown()


def test_overlapping_network_faults_mend_independently(healthy):
    one, _ = play(healthy, "partition-one", {"f": "start-partition", "nodes": ["n1"]})
    flaky, _ = play(healthy, "flaky", {"f": "start-flaky", "target": "all"})
    one.invoke({"f": "stop-partition"})
    rules = healthy.fault_ctl("n1", "status")
    assert "statistic" in rules and "partition-one" not in rules, rules  # flaky's rules stay
    flaky.invoke({"f": "stop-flaky"})
    assert "-A KCHAOS" not in healthy.fault_ctl("n1", "status")
