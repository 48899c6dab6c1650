"""The disk faults against one real cluster on lazyfs: a full disk (disk-full) and a power failure that tears
each file's last write (torn-write). Each test observes the effect in Kafka's own logs and metadata, then the
heal, and checks that every acknowledged record is still there and nothing else is. On Kafka before 3.8 a torn
leader-epoch-checkpoint keeps the broker from starting until an operator removes it: one test shows that on purpose.

The cluster is shared by this folder's tests (conftest.py); each test heals what it broke and waits for a fully
in-sync topic again before the next one starts. The wall clock of each fault's apply and
heal ops is printed (`pytest -s`): findings/benchmarks.md quotes them.
"""
import base64
import re
import threading
import time
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from shared_cluster import LAZYFS, heal, until

from kchaos import nemesis
from kchaos.clusters import admin
from kchaos.core.kafka_versions import release_key
from kchaos.evidence.files import METADATA_DIR
from kchaos.evidence.kafka_logs import parse_epoch_checkpoint
from kchaos.nemesis.powerfail import torn_prefix

CFG = LAZYFS
TOPIC = CFG.topic
# Kafka 3.7's own words (kafka.log.LogManager, LogDirFailureChannel)
# Kafka halts on a full disk by whichever write fails first: a partition's append, or the high-watermark checkpoint
# it writes every 5 s, takes the log directory offline (all of them: the broker shuts down), or the metadata log's
# append fails in the Raft IO thread (a fatal fault).
HALTED = ("ERROR Shutdown broker because all log dirs in /var/lib/kafka/data have failed (kafka.log.LogManager)",
          "ERROR Encountered fatal fault: Unexpected error in raft IO thread")
WRITE_FAILED = ("ERROR Error while appending records to ", "ERROR Error while writing to checkpoint file ")
NO_SPACE = "java.io.IOException: No space left on device"
# Before 3.8 Kafka rewrites a leader-epoch-checkpoint without fsync when it truncates its epochs (KAFKA-15046; fsynced
# again from 3.8, KAFKA-16541): a power failure can tear it, and a torn one its reader refuses keeps the broker from
# starting (findings/torn-leader-epoch-checkpoint.md).
EPOCHS_UNSYNCED = release_key(CFG.cluster.kafka_version) < (3, 8)
LOG_DIR_FAILED = "ERROR Shutdown broker because all log dirs in /var/lib/kafka/data have failed"
FATAL_FAULT = "ERROR Encountered fatal fault: caught exception"


@pytest.fixture
def healthy(cluster):
    """The cluster, with every fault healed and the topic in sync again after the test."""
    yield cluster
    heal(cluster, CFG, ("disk-full", "torn-write"))
    for n in cluster.nodes:
        assert '"limit_bytes": null' in cluster.fault_ctl(n, "status"), f"{n}: its disk is still limited"


def state(cluster, partition, via=None):
    """Partition state as the metadata of broker `via` (default: any node that answers) has it."""
    for n in [via] if via else cluster.nodes:
        try:
            return admin.partitions(f"{cluster.address(n)}:9092", TOPIC.name)[partition]
        except Exception:
            if via:
                raise
    raise AssertionError("no broker answers")


class Sender:
    """A producer thread sending unique values (acks=all) to one partition until stopped; `acked` holds the
    values Kafka acknowledged, `sent` every value handed to the client."""

    def __init__(self, cluster, partition, tag, pause=0.005):
        self.p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 5,
                           "message.timeout.ms": 20000, "logger": admin.CLIENT_LOG})
        self.partition, self.tag, self.pause = partition, tag, pause
        self.sent: list[str] = []
        self.acked: set[str] = set()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def _done(self, err, msg):
        if err is None:
            self.acked.add(msg.value().decode())

    def _run(self):
        i = 0
        while not self.stop.is_set():
            v = f"{self.tag}-{i}"
            try:
                self.p.produce(TOPIC.name, v.encode(), partition=self.partition, on_delivery=self._done)
                self.sent.append(v)
                i += 1
            except BufferError:
                pass
            self.p.poll(0)
            time.sleep(self.pause)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()
        self.p.flush(30)


def read_partition(cluster, partition):
    """Every value of `partition` from offset 0 to its high watermark, in offset order."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"disk-check-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "logger": admin.CLIENT_LOG})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC.name, partition), timeout=10)
        c.assign([TopicPartition(TOPIC.name, partition, 0)])
        out, offset, deadline = [], 0, time.monotonic() + 60
        while offset < high:
            assert time.monotonic() < deadline, f"read {offset} of {high} records of partition {partition}"
            m = c.poll(1)
            if m is None or m.error():
                continue
            out.append(m.value().decode())
            offset = m.offset() + 1
        return out
    finally:
        c.close()


def server_log(cluster, node, since=0):
    """`node`'s server.log from byte `since` on."""
    with open(cluster.node_dir(node) / "server.log", "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


def log_size(cluster, node):
    return (cluster.node_dir(node) / "server.log").stat().st_size


def dump(cluster, node, partition, deep=True):
    """kafka.tools.DumpLogSegments over `node`'s local log of `partition` (Kafka may be down)."""
    d = f"{cluster.data_dir(node)}/{TOPIC.name}-{partition}"
    code, out = cluster.exec(node, ["sh", "-c", f"ls {d}/*.log | paste -sd,"])
    assert code == 0, out
    args = ["--deep-iteration"] if deep else []
    code, out = cluster.exec(node, ["kafka-ctl", "tool", "kafka.tools.DumpLogSegments", *args, "--files",
                                    out.strip()])
    assert code == 0, out
    return out


def node_text(cluster, node, path):
    """The bytes of `path` (under the node's data directory) on `node`, as text."""
    code, out = cluster.exec(node, ["base64", "-w0", f"{cluster.data_dir(node)}/{path}"])
    assert code == 0, out
    return base64.b64decode(out).decode("utf-8", errors="replace")


def refused_checkpoints(cluster, node, torn):
    """The leader-epoch-checkpoints among `torn` (the fault's report for `node`) that Kafka's reader refuses as
    they are now on the node's disk."""
    return sorted(p for p in torn if p and p.endswith("/leader-epoch-checkpoint")
                  and parse_epoch_checkpoint(node_text(cluster, node, p)) is None)


def start_refusing(cluster, nem, node, since, refused):
    """Power `node` on with `refused` torn leader-epoch-checkpoints on its disk: Kafka stops, naming one of them.
    The metadata log's, which Kafka loads first, is a fatal fault of its KRaft start; a partition's takes the only log
    directory offline. Then the operator's way out: remove them, and start Kafka again."""
    assert EPOCHS_UNSYNCED, f"Kafka {CFG.cluster.kafka_version} fsyncs its epoch checkpoints, yet tore {refused}"
    nem.invoke({"f": "start"})
    until(lambda: not cluster.is_running(node), 60, "Kafka stopping on a torn leader-epoch-checkpoint", every=0.5)
    log = server_log(cluster, node, since)
    metadata = [p for p in refused if p.startswith(f"{METADATA_DIR}/")]
    if metadata:
        assert FATAL_FAULT in log, log[-3000:]
        assert f"Error while reading checkpoint file {cluster.data_dir(node)}/{metadata[0]}" in log, log[-3000:]
    else:
        assert LOG_DIR_FAILED in log, log[-3000:]
    assert any(f" in checkpoint file [{cluster.data_dir(node)}/{p}]" in log for p in refused), log[-3000:]
    code, out = cluster.exec(node, ["rm", *(f"{cluster.data_dir(node)}/{p}" for p in refused)])
    assert code == 0, out
    cluster.start(node)


def records(dump_out):
    return sum(int(m) for m in re.findall(r"\bcount: (\d+)", dump_out))


def test_disk_full_halts_the_broker_moves_its_leaderships_and_the_heal_brings_it_back(healthy):
    leader = healthy.node_of(state(healthy, 0).leader)
    other = next(n for n in healthy.nodes if n != leader)
    since = log_size(healthy, leader)
    nem = nemesis.PACKAGES["disk-full"].make(healthy, CFG)
    with Sender(healthy, 0, "full") as s:
        time.sleep(1)
        t0 = time.monotonic()
        done = nem.invoke({"f": "disk-full", "target": "leader", "partition": 0, "pick": 1})
        apply_s = time.monotonic() - t0
        assert done["nodes"] == [leader]
        disk = done["disk"][leader]
        assert disk["headroom_bytes"] == CFG.nemesis.disk_full_headroom == 4096
        assert disk["used_bytes"] > 0 and disk["limit_bytes"] == disk["used_bytes"] + 4096
        # Kafka halts: the only log directory failed (ENOSPC), and it is the metadata log's too.
        until(lambda: any(h in server_log(healthy, leader, since) for h in HALTED), 60, "the log dir failing",
              every=0.5)
        failed_s = time.monotonic() - t0
        until(lambda: not healthy.is_running(leader), 20, "the broker exiting", every=0.5)
        log = server_log(healthy, leader, since)
        assert NO_SPACE in log and any(w in log for w in WRITE_FAILED), log[-3000:]
        # The controller fences it and moves partition 0's leadership to an in-sync follower.
        until(lambda: state(healthy, 0, other).leader not in (-1, healthy.id_of(leader)), 30, "a new leader", every=0.5)
        moved_s = time.monotonic() - t0
        time.sleep(2)  # acks=all writes go on against the new leader, ISR of two
        assert "limit_bytes" in healthy.fault_ctl(leader, "status")
        t0 = time.monotonic()
        mended = nem.invoke({"f": "disk-free"})
        heal_s = time.monotonic() - t0
        assert mended["nodes"] == [leader]
        assert mended["disk"][leader]["refused"] > 0
        assert mended["disk"][leader]["used_bytes"] <= disk["limit_bytes"]
        assert '"limit_bytes": null' in healthy.fault_ctl(leader, "status")
        healthy.wait_topic(TOPIC.name, 3, 90)  # back, caught up, in every ISR
        synced_s = time.monotonic() - t0
        time.sleep(1)
    print(f"\ntiming disk-full: apply {apply_s:.2f} s, log dir failed after {failed_s:.1f} s, leader moved after "
          f"{moved_s:.1f} s; heal op {heal_s:.2f} s, topic in sync {synced_s:.1f} s after the heal began")
    assert healthy.id_of(leader) in admin.registered_brokers(f"{healthy.address(other)}:9092")
    values = read_partition(healthy, 0)
    assert s.acked and s.acked <= set(values), f"{len(s.acked - set(values))} acknowledged writes lost"
    produced = set(s.sent)
    assert not [v for v in values if v.startswith("full-") and v not in produced], "a value nobody produced"


def test_torn_write_power_failure_is_truncated_by_log_recovery_and_nothing_acked_is_lost(healthy):
    victim = healthy.node_of(state(healthy, 1).leader)
    since = log_size(healthy, victim)
    nem = nemesis.PACKAGES["torn-write"].make(healthy, CFG)
    with Sender(healthy, 1, "torn", pause=0.002) as s:
        # The power fails under acknowledged writes; how many fit before it is the machine's speed, and what the
        # fault tore of this partition's segment is asserted below.
        until(lambda: s.acked, 30, "an acknowledged write", every=0.5)
        t0 = time.monotonic()
        done = nem.invoke({"f": "power-fail", "target": "leader", "partition": 1, "pick": 77})
        apply_s = time.monotonic() - t0
        assert done["nodes"] == [victim] and done["seed"] == 77
        assert not healthy.is_running(victim)
        torn = {t["path"]: t for t in done["torn"][victim]}
        seg = next(p for p in torn if re.fullmatch(rf"{TOPIC.name}-1/\d+\.log", p or ""))
        t = torn[seg]
        assert 0 <= t["kept"] < t["length"] and t["torn"] == t["length"] - t["kept"]
        lost = {f["path"]: f for f in done["lost"][victim]["files"]}
        assert lost[seg]["ranges"] == [[t["offset"] + t["kept"], t["offset"] + t["length"]]]
        # On its disk now: every batch before the torn write, then the prefix kept of it. A prefix that is not a
        # whole number of batches ends in a partial one, which Kafka's own dump reports as invalid bytes.
        before = dump(healthy, victim, 1)
        assert "isvalid: false" not in before
        trailing = [int(n) for n in re.findall(r"Found (\d+) invalid bytes at the end of", before)]
        assert all(0 < n <= t["kept"] for n in trailing), (trailing, t)
        # Earlier faults may have left other partitions' epoch checkpoints on this node unsynced (EPOCHS_UNSYNCED).
        refused = refused_checkpoints(healthy, victim, torn)
        # Power back on: log recovery (an unclean shutdown) drops what follows the last whole batch.
        t0 = time.monotonic()
        if refused:
            start_refusing(healthy, nem, victim, since, refused)
        else:
            nem.invoke({"f": "start"})
        heal_s = time.monotonic() - t0
        until(lambda: healthy.id_of(victim) in state(healthy, 1, victim).isr, 90, "the victim back in the ISR",
              every=0.5)
        synced_s = time.monotonic() - t0
    log = server_log(healthy, victim, since)
    assert "unclean shutdown" in log.lower() or "Recovering unflushed segment" in log, log[-3000:]
    truncated = re.search(rf"WARN \[LogLoader partition={TOPIC.name}-1, [^]]*\] Corruption found in segment \d+, "
                          rf"truncating to offset (\d+)", log)
    assert bool(truncated) == bool(trailing), log[-5000:]  # Kafka's recovery cut the torn batch off, if any
    print(f"\ntiming torn-write: apply {apply_s:.2f} s (tore {len(torn)} files; {seg}: kept {t['kept']} of a "
          f"{t['length']}-byte write, {trailing[0] if trailing else 0} invalid bytes left on disk, recovery "
          f"truncated to offset {truncated.group(1) if truncated else '-'}), heal op {heal_s:.2f} s, back in the "
          f"ISR {synced_s:.1f} s after the heal began")
    healthy.wait_topic(TOPIC.name, 3, 90)
    after = dump(healthy, victim, 1)
    assert "isvalid: false" not in after and "invalid bytes" not in after
    values = read_partition(healthy, 1)
    produced = set(s.sent)
    assert not [v for v in values if v.startswith("torn-") and v not in produced], "a value nobody produced"
    assert s.acked <= set(values), f"{len(s.acked - set(values))} acknowledged writes lost"
    assert records(after) >= len([v for v in values if v.startswith("torn-")])


def test_a_power_failure_tears_an_epoch_checkpoint_that_kafka_3_7_wrote_unsynced_and_kafka_cannot_start(healthy):
    """Kafka 3.7 writes a partition's leader-epoch-checkpoint without fsync when its log start offset moves (here:
    records deleted). A power failure tearing that write inside its one entry leaves a file Kafka's reader refuses:
    the broker takes its log directory offline and stops, at every start, until the file is removed."""
    if not EPOCHS_UNSYNCED:
        pytest.skip(f"Kafka {CFG.cluster.kafka_version} fsyncs its leader-epoch checkpoints")
    topic = replace(TOPIC, name="epochs", partitions=1)
    admin.create_topic(healthy.bootstrap(), topic)
    p = Producer({"bootstrap.servers": healthy.bootstrap(), "acks": "all", "logger": admin.CLIENT_LOG})
    for i in range(30):
        p.produce(topic.name, f"e-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    victim = healthy.node_of(admin.partitions(healthy.bootstrap(), topic.name)[0].leader)
    since = log_size(healthy, victim)
    path = f"{topic.name}-0/leader-epoch-checkpoint"
    client = AdminClient({"bootstrap.servers": healthy.bootstrap(), "logger": admin.CLIENT_LOG})
    for f in client.delete_records([TopicPartition(topic.name, 0, 30)]).values():
        assert f.result(30).low_watermark == 30
    # Its one entry now starts at the new log start offset: written, not fsynced.
    until(lambda: (parse_epoch_checkpoint(node_text(healthy, victim, path)) or [(None, None)])[0][1] == 30, 30,
          "the checkpoint rewritten")
    text = node_text(healthy, victim, path)
    seed = next(s for s in range(1, 1000) if parse_epoch_checkpoint(text[:torn_prefix(s, path, len(text))]) is None)
    nem = nemesis.PACKAGES["torn-write"].make(healthy, CFG)
    done = nem.invoke({"f": "power-fail", "nodes": [victim], "pick": seed})
    torn = {t["path"]: t for t in done["torn"][victim]}
    assert torn[path]["length"] == len(text) and torn[path]["kept"] == torn_prefix(seed, path, len(text)), torn[path]
    assert node_text(healthy, victim, path) == text[:torn[path]["kept"]]
    refused = refused_checkpoints(healthy, victim, torn)
    assert path in refused
    start_refusing(healthy, nem, victim, since, refused)
    healthy.wait_topic(topic.name, 3, 90)
