"""The `mix` nemesis without a cluster: drawn from the seed, overlapping, only the named families, replayable."""
import json

import pytest

from kchaos import nemesis
from kchaos.core.config import ConfigError, NemesisConfig, TestConfig
from kchaos.harness.build import preflight
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.nemesis import mix
from kchaos.nemesis.schedule import load_schedule, make_schedule, save_schedule, schedule_names, specs_in
from kchaos.nemesis.targets import Target

FAMILY_OF = {p.name: fam for fam, pkgs in mix.FAMILIES.items() for p in pkgs}


def cfg(families=None, seed=3, time_limit=600, interval=10, **kw):
    n = NemesisConfig(names=("mix",), interval=interval, jitter=0.3, restart_delay=5,
                      **({} if families is None else {"mix_families": tuple(families)}))
    return TestConfig(seed=seed, time_limit=time_limit, nemesis=n, **kw)


def episodes(ops):
    """(spec, start, end) of every fault, pairing each start op with the next op of its spec."""
    out, open_ = [], {}
    for s in ops:
        pkg, _ = nemesis.split(s.nemesis)
        if len(pkg.fs) == 1:
            out.append((s.nemesis, s.at, s.at))
        elif s.op["f"] == pkg.fs[0]:
            assert s.nemesis not in open_, f"{s.nemesis} started twice at {s.at}"
            open_[s.nemesis] = s.at
        else:
            assert s.op["f"] == pkg.fs[1]
            out.append((s.nemesis, open_.pop(s.nemesis), s.at))
    assert not open_, f"faults never mended: {open_}"
    return out


def test_same_seed_same_schedule_different_seed_different():
    a, b = make_schedule(cfg()), make_schedule(cfg())
    assert a and [s.to_dict() for s in a] == [s.to_dict() for s in b]
    assert [s.to_dict() for s in make_schedule(cfg(seed=4))] != [s.to_dict() for s in a]


def test_faults_overlap_and_hold_for_blips_and_past_the_timeouts():
    c = cfg()
    eps = episodes(make_schedule(c))
    overlapping = sum(1 for i, (_, s1, e1) in enumerate(eps) for (_, s2, _) in eps[i + 1:] if s1 < s2 < e1)
    assert overlapping >= len(eps) // 4, (overlapping, len(eps))
    holds = [e - s for _, s, e in eps]
    lag = c.cluster.replica_lag_time_max_ms / 1000
    assert min(holds) >= c.nemesis.restart_delay
    assert any(h < lag for h in holds) and any(h > lag + 5 for h in holds)
    assert max(holds) <= 1.5 * 15 + 1e-9  # 1.5 x the longest timeout a fault must outlive (lag + 5 s)


def test_a_package_never_overlaps_itself_nor_two_power_failures_each_other():
    for seed in range(20):
        eps = sorted(episodes(make_schedule(cfg(seed=seed))), key=lambda e: e[1])
        last_end: dict[str, float] = {}
        power_end = -1.0
        for spec, start, end in eps:
            pkg = spec.partition(":")[0]
            assert start >= last_end.get(pkg, -1.0) + 1.0, (seed, spec, start)
            last_end[pkg] = end
            if FAMILY_OF[pkg] == "page-cache":
                assert start >= power_end + 1.0, (seed, spec, start)
                power_end = end


@pytest.mark.parametrize("families", [("network",), ("process", "slow"), ("page-cache",), ("disk",), ("operator",),
                                      ("membership",)])
def test_only_the_named_families_appear(families):
    seen = set()
    for seed in range(10):
        for s in make_schedule(cfg(families, seed=seed)):
            seen.add(FAMILY_OF[s.nemesis.partition(":")[0]])
    assert seen == set(families)


def test_default_families_leave_out_the_operator_and_faults_outside_the_promise():
    # clock is named by hand: a host without libfaketime, or an external Kafka, would refuse the default mix; so
    # is membership, which an external Kafka refuses too, and which replaces disks an operator may not expect to lose
    assert mix.NAME not in mix.FAMILIES and set(NemesisConfig().mix_families) == set(mix.FAMILIES) - {
        "operator", "clock", "membership"}
    families, kinds = set(), set()
    for seed in range(30):
        for s in make_schedule(cfg(seed=seed)):
            pkg, target = nemesis.split(s.nemesis)
            families.add(FAMILY_OF[pkg.name])
            kind = Target.parse(target).kind
            kinds.add((pkg.name, kind))
            assert pkg.name not in ("elect-unclean", "rolling-restart", "power-fail-all")
            assert kind != "all" or pkg.targets[0] == "all", s.nemesis  # splits and flaky only
            if FAMILY_OF[pkg.name] == "page-cache":
                assert kind in ("one", "leader", "follower", "controller"), s.nemesis
    assert families == {"process", "network", "page-cache", "slow", "disk"}
    assert ("flaky", "all") in kinds and ("partition-halves", "all") in kinds


def test_every_entry_names_a_concrete_spec_the_runner_can_build():
    c = cfg()
    ops = make_schedule(c)
    specs = specs_in(c.nemesis.names, ops)
    assert "mix" not in specs and set(specs) == {s.nemesis for s in ops}
    for s in ops:
        nemesis.check_spec(s.nemesis, c.topic.partitions)
        pkg, target = nemesis.split(s.nemesis)
        assert s.op["f"] in pkg.fs
        if s.op["f"] == pkg.fs[0] and target:
            t = Target.parse(target)
            assert s.op["target"] == t.kind and s.op.get("partition") == t.partition
    assert all(":" in s for s in specs)  # the target (and partition) is in the spec, not left to a default
    assert all(s.at < c.time_limit for s in ops)


def test_schedule_json_of_a_mix_run_round_trips(tmp_path):
    c = cfg(time_limit=120)
    ops = make_schedule(c)
    path = tmp_path / "schedule.json"
    save_schedule(ops, path)
    replay = c.with_(nemesis=NemesisConfig(names=schedule_names(path), schedule_file=str(path)))
    again = load_schedule(path, replay)
    assert [s.to_dict() for s in again] == [s.to_dict() for s in ops]
    assert [s.to_dict() for s in make_schedule(replay)] == [s.to_dict() for s in ops]
    assert set(schedule_names(path)) == {s.nemesis for s in ops}
    assert json.loads(path.read_text())[0]["nemesis"] == ops[0].nemesis


def test_preflight_picks_lazyfs_when_page_cache_or_slow_disk_may_be_drawn(tmp_path):
    assert preflight(cfg(store=str(tmp_path))).cluster.storage == "lazyfs"
    assert preflight(cfg(["slow"], store=str(tmp_path))).cluster.storage == "lazyfs"
    assert preflight(cfg(["process", "network"], store=str(tmp_path))).cluster.storage == "plain"
    assert nemesis.needs_lazyfs(("mix",), ("page-cache",)) and not nemesis.needs_lazyfs(("mix",), ("process",))


def test_replayed_mix_schedule_preflights_to_its_concrete_specs(tmp_path):
    c = cfg(time_limit=120, store=str(tmp_path))
    path = tmp_path / "schedule.json"
    save_schedule(make_schedule(c), path)
    replay = preflight(c.with_(nemesis=NemesisConfig(names=(), schedule_file=str(path))))
    assert "mix" not in replay.nemesis.names and set(replay.nemesis.names) == set(schedule_names(path))


def test_test_json_keeps_the_families_of_a_mix_run():
    c = config_from_args(build_parser().parse_args(
        ["run", "--seed", "1", "--nemesis", "mix", "--mix-families", "network,slow"]))
    assert c.nemesis.mix_families == ("network", "slow")
    assert TestConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert TestConfig().to_dict()["nemesis"]["mix_families"] == list(TestConfig().nemesis.mix_families)


@pytest.mark.parametrize("argv, needle", [
    (["--nemesis", "mix", "--mix-families", "process,disks"], "unknown --mix-families 'disks'"),
    (["--nemesis", "mix", "--mix-families", ","], "names no family"),
    (["--nemesis", "mix", "--mix-families", "slow,slow"], "slow more than once"),
    (["--nemesis", "mix,kill-leader"], "drop the other names"),
    (["--nemesis", "mix:one"], "takes no target"),
    (["--mix-families", "network"], "only applies to --nemesis mix"),
    (["--nemesis", "mix", "--storage", "plain"], "need --storage lazyfs"),
])
def test_bad_mix_input_is_one_line_and_exit_3_before_anything_is_created(argv, needle, refused_run):
    refused_run(argv, needle)


def test_a_family_name_is_checked_against_the_registry():
    with pytest.raises(ConfigError, match="families: process, network, page-cache, slow, disk, clock, operator"):
        make_schedule(cfg(["pagecache"]))
    assert mix.check(cfg(["process", "network", "page-cache", "slow", "disk", "operator"])) is None
