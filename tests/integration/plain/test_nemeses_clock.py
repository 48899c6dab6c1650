"""The clock faults against one real cluster: the skewed broker's wall clock read through Kafka itself.

Kafka stamps a record with its leader's wall clock when the topic's `message.timestamp.type` is
LogAppendTime, and returns that stamp in the produce response: a record's timestamp minus the
harness's clock is the leader's skew. The cluster is the folder's (conftest.py); each test heals what it
broke and waits for fully in-sync topics again before the next one starts.
"""
import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer
from confluent_kafka.admin import NewTopic
from shared_cluster import PLAIN, heal

from kchaos import nemesis
from kchaos.clusters import admin

STAMPED = "stamped"  # LogAppendTime: the leader's clock stamps every record
CFG = PLAIN


@pytest.fixture(scope="module")
def stamped(cluster):
    """The folder's cluster with the topic STAMPED created and in sync."""
    client = admin.admin_client(cluster.bootstrap())  # kept: the futures die with their client
    futs = client.create_topics([NewTopic(STAMPED, num_partitions=1, replication_factor=3,
                                          config={"message.timestamp.type": "LogAppendTime",
                                                  "min.insync.replicas": "2"})])
    futs[STAMPED].result(30)
    cluster.wait_topic(STAMPED, 3)
    return cluster


@pytest.fixture
def healthy(stamped):
    """The cluster, with every clock real again and both topics in sync after the test."""
    cluster = stamped
    yield cluster
    heal(cluster, CFG, ("clock-skew", "clock-strobe"), (STAMPED,))
    for n in cluster.nodes:
        status = cluster.fault_ctl(n, "status")
        assert "clock-loop" not in status and "clock offset +0" in status, f"{n} not healed: {status}"


def leader(cluster):
    """The node leading the stamped topic's partition."""
    return cluster.node_of(admin.partitions(cluster.bootstrap(), STAMPED)[0].leader)


def skews(cluster, n, gap=0.0):
    """Send `n` records to the stamped topic, `gap` seconds apart; for each, its LogAppendTime minus the
    harness's clock halfway through its send, and half the send's round trip, in seconds. The leader stamped
    the record somewhere within the round trip, so the first is its skew to within the second."""
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 0,
                  "logger": admin.CLIENT_LOG})
    out = []
    for _ in range(n):
        sent, got = time.time(), []
        p.produce(STAMPED, b"t", on_delivery=lambda err, msg, got=got: got.append((err, msg.timestamp())))
        p.flush(30)
        back = time.time()
        assert got and got[0][0] is None, f"send failed: {got}"
        kind, ms = got[0][1]
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        out.append((ms / 1000 - (sent + back) / 2, (back - sent) / 2))
        time.sleep(gap)
    return out


def near(sample, want, within=1.5):
    """Whether a sample of `skews` reads `want` to `within` s beyond its own uncertainty (half its round trip,
    which a loaded machine lengthens: the bound follows the measurement, not the machine's speed)."""
    skew, uncertain = sample
    return abs(skew - want) < within + uncertain


def settled(cluster, want, within=1.5, timeout=45.0):
    """Seconds until the leader's skew is `want` (to `within` s), polling by sends; fails after `timeout`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if near(skews(cluster, 1)[0], want, within):
            return time.monotonic() - t0
        time.sleep(0.1)
    pytest.fail(f"the leader's clock did not read {want:+.0f} s within {timeout:g} s (last {skews(cluster, 1)})")


def test_every_kafka_runs_under_libfaketime_with_a_zero_offset(healthy):
    for n in healthy.nodes:
        code, out = healthy.exec(n, ["sh", "-c", "grep -l libfaketime /proc/$(pgrep -x java)/maps"])
        assert code == 0, f"{n}: Kafka runs without libfaketime: {out}"
    assert all(near(s, 0, 1.0) for s in skews(healthy, 5))


def test_clock_skew_moves_the_leaders_append_time_and_the_heal_brings_it_back(healthy):
    node = leader(healthy)
    ids = {n: healthy.id_of(n) for n in healthy.nodes}
    nem, done = nemesis.split("clock-skew")[0].make(healthy, CFG), None
    t0 = time.monotonic()
    done = nem.invoke({"f": "start-clock-skew", "nodes": [node], "offset_s": 30})
    applied = time.monotonic() - t0
    assert done["offsets_s"] == {node: 30} and done["nodes"] == [node]
    took = settled(healthy, 30)
    ahead = skews(healthy, 5, 0.2)
    assert all(near(s, 30) for s in ahead), ahead
    assert leader(healthy) == node, "a clock 30 s ahead moved the leadership"
    assert "clock offset +30" in healthy.fault_ctl(node, "status")
    t0 = time.monotonic()
    nem.invoke({"f": "stop-clock-skew"})
    healed = time.monotonic() - t0
    back = settled(healthy, 0)
    assert all(near(s, 0) for s in skews(healthy, 5, 0.2))
    isr = admin.partitions(healthy.bootstrap(), STAMPED)[0].isr
    assert sorted(isr) == sorted(ids.values()), f"ISR after the skew: {isr}"
    print(f"\nclock-skew: applied in {applied:.2f} s, read by Kafka {took:.2f} s later; "
          f"healed in {healed:.2f} s, read {back:.2f} s later")


def test_clock_strobe_makes_the_leaders_clock_jump_and_the_heal_stops_it(healthy):
    node = leader(healthy)
    nem = nemesis.split("clock-strobe")[0].make(healthy, CFG)
    t0 = time.monotonic()
    done = nem.invoke({"f": "start-clock-strobe", "nodes": [node], "offset_s": -20})
    applied = time.monotonic() - t0
    assert done["strobe"] == {node: {"offsets_s": [0, -20], "period_s": 1}}
    seen = skews(healthy, 40, 0.15)  # 8 s or more: each offset held for a second
    near_zero = [s for s in seen if near(s, 0)]
    behind = [s for s in seen if near(s, -20)]
    assert len(near_zero) >= 5 and len(behind) >= 5 and len(near_zero) + len(behind) == len(seen), seen
    jumps = sum(1 for a, b in zip(seen, seen[1:]) if near(a, 0) != near(b, 0))
    assert jumps >= 4, f"the clock jumped {jumps} times in {len(seen)} sends: {seen}"
    assert "clock-loop" in healthy.fault_ctl(node, "status")
    t0 = time.monotonic()
    nem.invoke({"f": "stop-clock-strobe"})
    healed = time.monotonic() - t0
    assert "clock-loop" not in healthy.fault_ctl(node, "status")
    back = settled(healthy, 0)
    after = skews(healthy, 15, 0.2)  # 3 s: a loop still running would have moved the clock again
    assert all(near(s, 0) for s in after), after
    print(f"\nclock-strobe: applied in {applied:.2f} s; {jumps} jumps in {len(seen)} sends; "
          f"healed in {healed:.2f} s, read {back:.2f} s later")
