"""The share workload without a cluster: its options and their one-line errors, the brokers' settings on a line with
share groups, the members' consumer settings, its verdict rules, and its Java members compiled only where the
kafka-clients jars have a KafkaShareConsumer."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kchaos.checkers.share.check import SHARE, SHARE_KINDS
from kchaos.clusters.kraft import layout, server_properties
from kchaos.core.config import ClusterConfig, ConfigError, TestConfig, validate
from kchaos.core.kafka_versions import line_of
from kchaos.core.promise import Promise
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.nemesis import check_spec
from kchaos.workloads.java_client import SHARE_REFUSED, share_consumer_props
from kchaos.workloads.share.options import parse_mix
from kchaos.workloads.share.verdict import judge_share


def cfg(*argv: str) -> TestConfig:
    return validate(config_from_args(build_parser().parse_args(["run", "--seed", "7", *argv])), check_spec)


def test_the_share_workload_runs_on_the_java_client_by_default_with_its_own_options():
    c = cfg("--workload", "share", "--kafka-version", "4.4", "--share-ack-mix", "accept=1,none=1",
            "--share-lock-ms", "2000", "--share-delivery-limit", "3")
    assert c.workload.client == "java" and c.workload.client_version.startswith("4.4")
    o = c.workload.options
    assert (o.ack_mix, o.lock_ms, o.delivery_limit) == ("accept=1,none=1", 2000, 3)
    assert parse_mix(o.ack_mix) == {"accept": 1, "release": 0, "reject": 0, "none": 1}


def test_on_41_share_groups_need_their_preview_feature_and_the_members_run_kafka_clients_42():
    c = cfg("--workload", "share", "--kafka-version", "4.1.0", "--kafka-feature", "share.version=1")
    assert c.workload.client_version == "4.2.2" and c.cluster.kafka_version == "4.1.0"
    assert cfg("--workload", "txn", "--client", "java", "--kafka-version", "4.1.0").workload.client_version == "4.1.0"
    specs = layout(c.cluster)
    assert "share.coordinator.state.topic.num.partitions=3\n" in server_properties(specs[0], specs, c.cluster)
    plain = ClusterConfig(kafka_version="4.1.0")
    assert "share.coordinator" not in server_properties(layout(plain)[0], layout(plain), plain)


def test_on_42_the_delivery_limit_is_the_brokers_and_only_43_on_set_the_groups_own():
    assert cfg("--workload", "share", "--kafka-version", "4.2").workload.options.delivery_limit == 5
    assert [v for v in ("4.2", "4.3", "4.4") if line_of(v).share_group_delivery_limit] == ["4.3", "4.4"]


@pytest.mark.parametrize(("argv", "idempotent"), [
    ([], True), (["--no-idempotence"], False), (["--acks", "1"], False), (["--acks", "1", "--idempotence"], True)])
def test_share_producers_are_idempotent_with_acks_all_unless_told_otherwise(argv, idempotent):
    a = build_parser().parse_args(["run", "--seed", "7", "--workload", "share", "--kafka-version", "4.4", *argv])
    assert config_from_args(a).producer.idempotence is idempotent
    queue = config_from_args(build_parser().parse_args(["run", "--seed", "7"]))
    assert queue.producer.idempotence is False  # the queue workload keeps Kafka's client default off


@pytest.mark.parametrize(("argv", "says"), [
    (["--kafka-version", "3.7"], "needs a Kafka line with share groups (4.2 or later, or 4.1 with the preview"),
    (["--kafka-version", "4.0"], "needs a Kafka line with share groups"),
    (["--kafka-version", "4.1"], "on Kafka 4.1 needs share groups' preview feature on: --kafka-feature share"),
    (["--kafka-version", "4.1", "--kafka-feature", "share.version=0"], "--kafka-feature share.version=1"),
    (["--kafka-version", "4.1", "--kafka-feature", "share.version=1", "--share-delivery-limit", "3"],
     "Kafka 4.1 has no group config share.delivery.count"),
    (["--share-ack-mix", "accept=x"], "--share-ack-mix takes KIND=WEIGHT"),
    (["--share-ack-mix", "ack=3"], "--share-ack-mix takes KIND=WEIGHT"),
    (["--share-ack-mix", "release=1,none=1"], "must give accept or reject some weight"),
    (["--share-lock-ms", "500"], "--share-lock-ms must be 1000..60000"),
    (["--share-delivery-limit", "11"], "--share-delivery-limit must be 2..10"),
    (["--client", "python"], "--client java"),
    (["--consumers", "0"], "--consumers >= 1"),
    (["--rate", "max"], "no --in-flight, --producer-processes or --rate max"),
    (["--share-commit", "later"], "--share-commit must be one of sync, async, implicit"),
    (["--kafka-version", "4.2", "--share-delivery-limit", "3"], "Kafka 4.2 has no group config share.delivery.count"),
    (["--share-commit", "implicit", "--share-ack-mix", "accept=1,release=1"], "it takes no --share-ack-mix"),
])
def test_bad_share_options_are_refused_in_one_line(argv, says):
    base = ["--workload", "share", "--kafka-version", "4.4"]
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        cfg(*base, *argv)


def test_a_refused_share_run_exits_3_before_anything_is_made(tmp_path):
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-m", "kchaos", "run", "--workload", "share", "--kafka-version", "3.7",
                           "--store", str(store)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 3
    assert len(proc.stderr.strip().splitlines()) == 1 and "share groups" in proc.stderr
    assert not store.exists()


def test_brokers_of_a_share_line_size_the_share_state_topic_and_allow_short_locks():
    def props(version: str) -> str:
        c = ClusterConfig(kafka_version=version)
        specs = layout(c)
        return server_properties(specs[0], specs, c)
    on44, on37 = props("4.4.0"), props("3.7.2")
    assert "share.coordinator.state.topic.num.partitions=3\n" in on44
    assert "group.share.min.record.lock.duration.ms=1000\n" in on44
    assert "share.coordinator" not in on37 and "group.share" not in on37


def test_members_are_not_given_what_a_share_consumer_refuses():
    props = share_consumer_props("10.0.0.1:9092", 10_000)
    assert props["bootstrap.servers"] == "10.0.0.1:9092"
    assert not set(SHARE_REFUSED) & set(props)


def _results(**counts: int) -> tuple[dict, dict]:
    c = {**dict.fromkeys(SHARE_KINDS, 0), "acked": 100, "delivered": 100, "unseen": 0, "redelivered": 3, **counts}
    return {"counts": c, "checkers": {SHARE: {"counts": c}}}, c


def test_every_kind_fails_the_run_and_redeliveries_do_not():
    results, counts = _results()
    assert judge_share(results, counts).verdict == "pass"
    for kind in SHARE_KINDS:
        results, counts = _results(**{kind: 1})
        j = judge_share(results, counts)
        assert j.verdict == "fail" and j.failed == {kind: 1}, kind


def test_a_record_accepted_twice_is_listed_as_allowed_and_passes():
    results, counts = _results(accepted_twice=2)
    j = judge_share(results, counts)
    assert j.verdict == "pass" and j.allowed == {"accepted_twice": 2} and "told" in j.why["allowed"]["accepted_twice"]


def test_a_lost_record_outside_the_promise_is_allowed_and_the_other_kinds_still_fail():
    acks1 = Promise.of({"producer": {"acks": "1"}})
    results, counts = _results(share_lost=4)
    j = judge_share(results, counts, acks1)
    assert j.verdict == "pass" and j.allowed == {"share_lost": 4}
    results, counts = _results(share_lost=4, redelivered_after_accept=1)
    j = judge_share(results, counts, acks1)
    assert j.verdict == "fail" and j.failed == {"redelivered_after_accept": 1}


def test_an_unfinished_drain_leaves_the_run_unknown_and_nothing_acknowledged_cannot_pass():
    results, counts = _results(unseen=5)
    j = judge_share(results, counts)
    assert j.verdict == "unknown" and "final drain did not complete" in j.undecided[-1]
    results, counts = _results(acked=0, delivered=0, redelivered=0)
    assert judge_share(results, counts).verdict == "unknown"


def test_a_crash_needs_running_members_and_picks_one_by_the_seed():
    from kchaos.workloads.share.workload import ShareWorkload

    class Program:
        shares = True

    c = cfg("--workload", "share", "--kafka-version", "4.4", "--consumers", "3")
    w = ShareWorkload(c, java=Program())  # type: ignore[arg-type]
    members, drainers = w.processes()
    assert members == [4, 5, 6] and drainers == [7, 8]
    with pytest.raises(ValueError, match="not running"):
        w.crash_client(3, 2.0)

    class Members:
        def __init__(self):
            self.told = []

        def crash(self, process, restart_after):
            self.told.append((process, restart_after))
            return True
    w._members = Members()  # type: ignore[assignment]
    first = w.crash_client(3, 2.0)
    assert first == w.crash_client(3, 2.0) and first["member"] in members
    assert w._members.told == [(first["member"], 2.0)] * 2


def test_the_share_workload_refuses_a_java_client_without_share_consumers():
    from kchaos.workloads.share.workload import ShareWorkload

    class Old:
        shares = False

    with pytest.raises(ValueError, match="4.2 or later"):
        ShareWorkload(cfg("--workload", "share", "--kafka-version", "4.4"), java=Old())  # type: ignore[arg-type]
