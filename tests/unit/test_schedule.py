"""The fault schedule is drawn up front from the seed: same seed, same schedule."""
from kchaos.core.config import NemesisConfig, TestConfig
from kchaos.nemesis.schedule import kills_closer_than, make_schedule


def test_same_seed_same_schedule_different_seed_different():
    c = TestConfig(seed=7, time_limit=120, nemesis=NemesisConfig(interval=10, jitter=0.3, restart_delay=4))
    a, b = make_schedule(c), make_schedule(c)
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b]
    assert [s.to_dict() for s in make_schedule(c.with_(seed=8))] != [s.to_dict() for s in a]


def test_kill_then_start_within_the_time_limit():
    c = TestConfig(seed=1, time_limit=60, nemesis=NemesisConfig(interval=10, jitter=0.2, restart_delay=3))
    ops = make_schedule(c)
    fs = [s.op["f"] for s in ops]
    assert fs[0::2] == ["kill"] * (len(ops) // 2) and fs[1::2] == ["start"] * (len(ops) // 2)
    assert 4 <= len(ops) // 2 <= 7
    for kill, start in zip(ops[0::2], ops[1::2]):
        assert 0 <= kill.op["partition"] < c.topic.partitions
        assert abs(start.at - kill.at - 3) < 1e-9
        assert kill.at < 60


def test_no_faults_for_none():
    assert make_schedule(TestConfig(nemesis=NemesisConfig(names=("none",)))) == []


def test_kills_closer_than_the_session_are_found_and_spaced_ones_are_not():
    def kills_every(interval):
        c = TestConfig(seed=3, time_limit=40, nemesis=NemesisConfig(interval=interval, jitter=0, restart_delay=3))
        return make_schedule(c)

    gap = kills_closer_than(kills_every(7), 9.0)
    assert gap is not None and 6.9 < gap < 7.1
    assert kills_closer_than(kills_every(12), 9.0) is None
    assert kills_closer_than(kills_every(7), 3.0) is None  # --broker-session-timeout-ms 3000
    assert kills_closer_than(make_schedule(TestConfig(nemesis=NemesisConfig(names=("none",)))), 9.0) is None
