"""The nemesis catalogue without a cluster: specs, grudges, schedules drawn from the seed, replay files."""
import json
import random
from dataclasses import replace
from itertools import combinations

import pytest

from kchaos import nemesis
from kchaos.core.config import ConfigError, NemesisConfig, TestConfig
from kchaos.nemesis.base import outlive_lag, outlive_session
from kchaos.nemesis.network import bridge, halves, isolate, lossy, majorities_ring, oneway
from kchaos.nemesis.schedule import load_schedule, make_schedule, save_schedule, schedule_names
from kchaos.nemesis.targets import FaultSkipped, Target, await_isr

NODES = ["n1", "n2", "n3", "n4", "n5"]


def cfg(names, **kw):
    return TestConfig(seed=kw.pop("seed", 3), time_limit=kw.pop("time_limit", 120),
                      nemesis=NemesisConfig(names=tuple(names), interval=10, jitter=0.2, restart_delay=3, **kw))


def reach(grudge, a, b):
    """Whether packets from a arrive at b."""
    return a not in grudge.get(b, set())


@pytest.mark.parametrize("spec", ["kill", "kill:majority", "pause:controller", "slow-follower:followers:2",
                                  "partition-one:leader:0", "power-fail-all", "flaky", "none"])
def test_known_specs(spec):
    nemesis.check_spec(spec)


@pytest.mark.parametrize("spec, needle", [
    ("bogus", "unknown nemesis 'bogus'"),
    ("kill-leader:one", "cannot aim at 'one'"),
    ("partition-halves:leader", "cannot aim at"),
    ("rolling-restart:one", "takes no target"),
    ("kill:boss", "unknown target"),
    ("kill:one:3", "takes no partition"),
    ("kill:leader:x", "must be a number"),
])
def test_bad_specs(spec, needle):
    with pytest.raises(ValueError, match=needle):
        nemesis.check_spec(spec)


def test_target_round_trip():
    for s in ["one", "leader", "leader:4", "followers:0", "controller"]:
        assert str(Target.parse(s)) == s


def test_isolate_cuts_both_ways_and_nothing_else():
    g = isolate(["n2"], NODES, random.Random(1))
    for a, b in combinations(NODES, 2):
        assert reach(g, a, b) == reach(g, b, a) == ("n2" not in (a, b))


def test_halves_are_two_disconnected_cliques():
    for seed in range(20):
        g = halves([], NODES, random.Random(seed))
        side = {n: frozenset([n] + [m for m in NODES if reach(g, m, n)]) for n in NODES}
        assert len(set(side.values())) == 2
        assert sorted(len(s) for s in set(side.values())) == [2, 3]
        assert all(reach(g, a, b) == reach(g, b, a) for a, b in combinations(NODES, 2))


def test_majorities_ring_every_node_sees_a_distinct_majority():
    for seed in range(20):
        g = majorities_ring([], NODES, random.Random(seed))
        views = [frozenset(m for m in NODES if reach(g, m, n)) for n in NODES]
        assert all(len(v) == 3 for v in views)
        assert len(set(views)) == 5


def test_bridge_node_reaches_both_halves_which_do_not_reach_each_other():
    for seed in range(20):
        g = bridge([], NODES, random.Random(seed))
        bridges = [n for n in NODES if all(reach(g, n, m) and reach(g, m, n) for m in NODES)]
        assert len(bridges) == 1
        rest = [n for n in NODES if n != bridges[0]]
        cut = [(a, b) for a, b in combinations(rest, 2) if not reach(g, a, b)]
        assert len(cut) == 4  # 2 x 2 across the halves


def test_oneway_drops_only_the_targets_outgoing_packets():
    g = oneway(["n1"], NODES, random.Random(0))
    assert all(not reach(g, "n1", m) and reach(g, m, "n1") for m in NODES[1:])


def test_lossy_hits_only_the_targets():
    g = lossy(["n3"], NODES, random.Random(0))
    assert g == {"n3": set(NODES) - {"n3"}}


def test_every_package_draws_ops_it_can_play_and_mends_what_it_breaks():
    c = TestConfig(time_limit=300, nemesis=NemesisConfig(interval=20, restart_delay=3, upgrade_to="4.4.0"))
    for name, pkg in nemesis.PACKAGES.items():
        ops = pkg.schedule(random.Random(1), c, name, None)
        assert ops, name
        assert all(op.op["f"] in pkg.fs and op.nemesis == name and 0 <= op.at < 300 for op in ops), name
        if len(pkg.fs) == 2 and pkg.mends:  # break, mend, break, mend ... never two breaks at once
            assert [o.op["f"] for o in ops] == [pkg.fs[0], pkg.fs[1]] * (len(ops) // 2), name
            for brk, mend in zip(ops[0::2], ops[1::2]):
                assert mend.at - brk.at >= 3 - 1e-9
        if pkg.targets:
            assert all(o.op["target"] == pkg.targets[0] for o in ops[0::2])


def test_fault_durations_outlive_the_kafka_timeouts_they_exercise():
    c = TestConfig()
    for spec, least in [("pause", c.cluster.broker_session_timeout_ms / 1000),
                        ("slow-follower", c.cluster.replica_lag_time_max_ms / 1000),
                        ("partition-leader", c.cluster.replica_lag_time_max_ms / 1000)]:
        ops = make_schedule(cfg([spec]))
        assert all(m.at - b.at > least for b, m in zip(ops[0::2], ops[1::2])), spec
    assert outlive_session(c) > 9 and outlive_lag(c) > 10


def test_a_spec_keeps_its_schedule_when_other_nemeses_join():
    alone = [s.to_dict() for s in make_schedule(cfg(["kill"]))]
    mixed = [s.to_dict() for s in make_schedule(cfg(["kill", "partition-halves", "slow-follower"]))]
    assert [s for s in mixed if s["nemesis"] == "kill"] == alone
    assert {s["nemesis"] for s in mixed} == {"kill", "partition-halves", "slow-follower"}
    assert [s["at"] for s in mixed] == sorted(s["at"] for s in mixed)


def test_leader_targets_carry_a_partition_and_every_target_a_pick():
    ops = make_schedule(cfg(["kill-leader", "slow-follower:followers:1"]))
    for o in ops:
        if o.op["f"] in ("kill", "start-slow"):
            assert isinstance(o.op["pick"], int)
            assert o.op["partition"] == 1 if o.nemesis.startswith("slow") else 0 <= o.op["partition"] < 3


def test_saved_schedule_replays_exactly(tmp_path):
    c = cfg(["kill:minority", "partition-bridge", "power-fail-leader"])
    ops = make_schedule(c)
    save_schedule(ops, tmp_path / "schedule.json")
    assert schedule_names(tmp_path / "schedule.json") == tuple(dict.fromkeys(o.nemesis for o in ops))
    again = make_schedule(c.with_(nemesis=NemesisConfig(schedule_file=str(tmp_path / "schedule.json"))))
    assert [s.to_dict() for s in again] == [s.to_dict() for s in ops]


@pytest.mark.parametrize("entries, needle", [
    ('{"at": 1}', "JSON list"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill"}}', "not JSON"),
    ('[{"at": 500, "nemesis": "kill", "op": {"f": "kill"}}]', "entry 0: at=500"),
    ('[{"at": 1, "nemesis": "bogus", "op": {"f": "kill"}}]', "unknown nemesis"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "resume"}}]', "f is one of kill, start"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill"}, "x": 1}]', "exactly at, nemesis and op"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill", "target": "leader", "partition": 9}}]', "partition in 0..2"),
    ('[{"at": 1, "nemesis": "kill-leader", "op": {"f": "kill", "target": "one"}}]', "cannot aim at 'one'"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill", "await_isr": 0}}]', "ISR size in 1..3"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill", "await_isr": true}}]', "ISR size in 1..3"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "start", "await_isr": 1}}]', "only a kill op"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill", "await_isr": 1, "await_s": 0}}]', "await_s must be"),
    ('[{"at": 1, "nemesis": "kill", "op": {"f": "kill", "await_isr": 1, "partition": 5}}]', "await_isr needs a"),
    ('[{"at": 1, "nemesis": "rolling-restart", "op": {"f": "roll", "await_isr": 1}}]', "takes no await_isr"),
])
def test_bad_schedule_files_name_the_entry(tmp_path, entries, needle):
    f = tmp_path / "s.json"
    f.write_text(entries)
    with pytest.raises(ConfigError, match=needle):
        load_schedule(f, cfg(["kill"], time_limit=100))


def test_hand_written_composed_schedule(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps([
        {"at": 2, "nemesis": "stall-follower", "op": {"f": "start-stall", "target": "followers", "partition": 0}},
        {"at": 10, "nemesis": "power-fail-leader", "op": {"f": "power-fail", "target": "leader", "partition": 0,
                                                          "await_isr": 1, "await_s": 25}},
        {"at": 30, "nemesis": "power-fail-leader", "op": {"f": "start"}},
        {"at": 34, "nemesis": "stall-follower", "op": {"f": "stop-stall"}},
    ]))
    assert schedule_names(f) == ("stall-follower", "power-fail-leader")
    assert nemesis.needs_lazyfs(schedule_names(f))
    ops = load_schedule(f, cfg([], time_limit=60))
    assert [o.at for o in ops] == [2, 10, 30, 34] and ops[1].op["await_isr"] == 1


class FakeClock:
    """Time that moves only when the waiter sleeps."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_await_isr_holds_the_fault_until_the_isr_shrinks():
    clock = FakeClock()
    answers = iter([(1, 2, 3), RuntimeError("metadata timed out"), (1, 3), (1,), (1, 2)])

    def read():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    waited, isr = await_isr(read, 1, timeout=10, poll=0.5, clock=clock, sleep=clock.sleep)
    assert isr == (1,) and waited == 1.5  # three polls missed: too large, unanswered, too large
    assert await_isr(lambda: (1, 2), 2, timeout=10, clock=clock, sleep=clock.sleep)[0] == 0


def test_await_isr_skips_the_fault_when_the_isr_never_shrinks():
    clock = FakeClock()
    with pytest.raises(FaultSkipped, match=r"did not shrink to 1 within 3 s \(last seen \[1, 2\]\)"):
        await_isr(lambda: (1, 2), 1, timeout=3, poll=0.5, clock=clock, sleep=clock.sleep)
    assert clock.now == 3.0

    def silent():
        raise RuntimeError("no broker answers")
    with pytest.raises(FaultSkipped, match="last seen unknown"):
        await_isr(silent, 1, timeout=1, clock=clock, sleep=clock.sleep)


def test_spec_partitions_must_exist_and_specs_not_repeat():
    from kchaos.harness.build import preflight
    with pytest.raises(ConfigError, match="partition 9, but the topic has 3"):
        preflight(cfg(["kill-leader:leader:9"]))
    with pytest.raises(ConfigError, match="names kill more than once"):
        preflight(cfg(["kill", "kill"]))


def test_storage_auto_follows_the_nemeses(tmp_path):
    from kchaos.harness.build import preflight
    base = cfg(["kill"]).with_(store=str(tmp_path / "r"))
    assert preflight(base).cluster.storage == "plain"
    assert preflight(base.with_(nemesis=NemesisConfig(names=("kill", "power-fail")))).cluster.storage == "lazyfs"
    from dataclasses import replace
    with pytest.raises(ConfigError, match="need --storage lazyfs"):
        preflight(base.with_(nemesis=NemesisConfig(names=("slow-disk",)),
                             cluster=replace(base.cluster, storage="plain")))


class Quorum:
    """Three brokers and three dedicated controllers; c2 leads the quorum."""

    nodes, controllers = ["n1", "n2", "n3"], ["c1", "c2", "c3"]

    def __init__(self):
        self.calls = []

    def address(self, node):
        return f"10.0.0.{node}"

    def fault_ctl(self, node, *args):
        self.calls.append((node, *args))


def test_quorum_cuts_touch_only_the_dedicated_controllers():
    from kchaos.nemesis.network import NetFault, apart

    c = Quorum()
    out = NetFault(c, "partition-quorum", None, quorum=True).begin(["c2"], {"pick": 1})
    assert out["grudge"] == {"c1": ["c2"], "c2": ["c1", "c3"], "c3": ["c2"]}  # brokers reach every controller
    assert {call[0] for call in c.calls} == {"c1", "c2", "c3"}
    assert ("c2", "drop", "partition-quorum", "10.0.0.c1", "10.0.0.c3") in c.calls
    c.calls.clear()
    out = NetFault(c, "partition-quorum-all", apart, quorum=True).begin(["c1", "c2", "c3"], {"pick": 1})
    assert out["grudge"] == {"c1": ["c2", "c3"], "c2": ["c1", "c3"], "c3": ["c1", "c2"]}  # no quorum


def test_quorum_cuts_need_dedicated_controllers_and_the_mix_draws_them_only_then(tmp_path):
    from kchaos.harness.build import preflight

    with pytest.raises(ConfigError, match="partition-quorum cuts the controller quorum apart from the brokers: it "
                                          "needs --controllers 3 or more"):
        preflight(TestConfig(store=str(tmp_path), nemesis=NemesisConfig(names=("partition-quorum",))))
    assert nemesis.PACKAGES["partition-quorum-all"].needs_controllers == 3

    def drawn(controllers):
        c = TestConfig(seed=4, time_limit=3000, cluster=replace(TestConfig().cluster, controllers=controllers),
                       nemesis=NemesisConfig(names=("mix",), mix_families=("network",)))
        return {o.nemesis.split(":")[0] for o in make_schedule(c)}
    assert not {"partition-quorum", "partition-quorum-all"} & drawn(0)
    assert {"partition-quorum", "partition-quorum-all"} <= drawn(3)


class Disks:
    """Three nodes whose fault-ctl answers as lazyfs would: a stats line per disk command, a torn report per
    torn power failure."""

    nodes, controllers, members = ["n1", "n2", "n3"], [], {"n1", "n2", "n3"}

    def __init__(self):
        self.calls, self.started, self.enospc = [], [], 0

    def fault_ctl(self, node, *args):
        self.calls.append((node, *args))
        if args[0] == "disk-full":
            return json.dumps({"used_bytes": 1050, "limit_bytes": 1000 + int(args[1]), "enospc": self.enospc})
        if args[0] == "disk-free":
            self.enospc += 7
            return json.dumps({"used_bytes": 5096, "limit_bytes": 5096, "enospc": self.enospc})
        if args[0] == "power-fail":
            f = {"path": "kchaos-0/00000000000000000000.log", "dirty_bytes": 4096, "oldest_age_ms": 3,
                 "oldest_unix_ms": 10, "size": 9000, "ranges": [[8100, 9000]],
                 "torn": {"offset": 8000, "length": 1000, "kept": 100}}
            return "detached\n" + json.dumps({"dirty_bytes": 4096, "dirty_files": 1, "at_unix_ms": 13,
                                              "oldest_age_ms": 3, "files": [f]})
        return ""

    def start(self, node):
        self.started.append(node)


def test_disk_full_records_the_limit_and_what_was_refused_and_its_mend_starts_kafka():
    c = Disks()
    nem = nemesis.PACKAGES["disk-full"].make(c, TestConfig(nemesis=NemesisConfig(disk_full_headroom=4096)))
    out = nem.invoke({"f": "disk-full", "nodes": ["n2"]})
    assert c.calls == [("n2", "disk-full", "4096")]
    assert out["disk"] == {"n2": {"headroom_bytes": 4096, "used_bytes": 1000, "limit_bytes": 5096}}
    out = nem.invoke({"f": "disk-free"})
    assert c.calls[-1] == ("n2", "disk-free") and c.started == ["n2"]
    assert out["disk"] == {"n2": {"used_bytes": 5096, "limit_bytes": 5096, "refused": 7}}
    nem.teardown()  # every node freed and started, whatever the state
    assert {n for n, *a in c.calls[-3:]} == {"n1", "n2", "n3"} and c.started[-3:] == ["n1", "n2", "n3"]


def test_torn_write_is_a_power_failure_seeded_by_the_pick_that_records_what_it_tore():
    c = Disks()
    nem = nemesis.PACKAGES["torn-write"].make(c, TestConfig())
    out = nem.invoke({"f": "power-fail", "nodes": ["n1"], "pick": 99})
    assert c.calls == [("n1", "power-fail", "torn", "99")]
    assert out["seed"] == 99 and out["lost"]["n1"]["unsynced_bytes"] == 4096
    assert out["torn"] == {"n1": [{"path": "kchaos-0/00000000000000000000.log", "offset": 8000, "length": 1000,
                                   "kept": 100, "torn": 900}]}
    assert nemesis.fault_kind("torn-write").breaks == "power-fail"  # the checkers' power loss
    plain = nemesis.PACKAGES["power-fail"].make(Disks(), TestConfig()).invoke({"f": "power-fail", "nodes": ["n1"]})
    assert "torn" not in plain and "seed" not in plain


def test_disk_faults_need_lazyfs_and_disk_full_aims_at_one_node():
    assert nemesis.needs_lazyfs(("disk-full",)) and nemesis.needs_lazyfs(("torn-write",))
    nemesis.check_spec("disk-full:leader:1")
    nemesis.check_spec("torn-write:follower")
    with pytest.raises(ValueError, match="cannot aim at 'majority'"):
        nemesis.check_spec("disk-full:majority")


def test_the_headroom_is_an_option_of_disk_full_runs_only(tmp_path):
    from kchaos.harness.cli.main import build_parser
    from kchaos.harness.options import config_from_args

    def parse(*argv):
        return config_from_args(build_parser().parse_args(["run", "--seed", "1", *argv]))
    c = parse("--nemesis", "disk-full:follower", "--disk-full-headroom", "0")
    assert c.nemesis.disk_full_headroom == 0 and c.to_dict()["nemesis"]["disk_full_headroom"] == 0
    assert TestConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert parse("--nemesis", "mix").to_dict()["nemesis"]["disk_full_headroom"] == 4096  # the mix may draw it
    assert parse("--nemesis", "kill").to_dict()["nemesis"]["disk_full_headroom"] == 4096  # written, unread
    with pytest.raises(ConfigError, match="only applies to --nemesis disk-full"):
        parse("--nemesis", "kill", "--disk-full-headroom", "10")
    with pytest.raises(ConfigError, match="--disk-full-headroom must be a number of bytes >= 0"):
        from kchaos.core.config import validate
        validate(c.with_(nemesis=NemesisConfig(names=("disk-full",), disk_full_headroom=-1)))
