"""The clock faults without a cluster: offsets drawn from the op, the registry's and the mix's view of
them, the refusal where a Kafka cannot run under libfaketime, and fault-ctl's clock commands on a
directory of their own (no Kafka runs there, so nothing refuses them)."""
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kchaos import nemesis
from kchaos.core.config import ConfigError, NemesisConfig, TestConfig
from kchaos.harness.build import preflight
from kchaos.nemesis import mix
from kchaos.nemesis.clock import MAX_SKEW_S, draw_offsets

FAULT_CTL = Path(__file__).parents[2] / "clusters" / "node" / "fault-ctl"


def test_offsets_are_drawn_per_node_from_the_pick_and_replay_exactly():
    op = {"f": "start-clock-skew", "target": "majority", "pick": 7}
    a = draw_offsets(["n3", "n1"], op)
    assert a == draw_offsets(["n1", "n3"], op) and set(a) == {"n1", "n3"}
    drawn = [s for p in range(200) for s in draw_offsets(["n1"], {"pick": p}).values()]
    assert all(1 <= abs(s) <= MAX_SKEW_S for s in drawn)
    assert min(drawn) < 0 < max(drawn)
    assert draw_offsets(["n1", "n2"], {"pick": 3, "offset_s": -12}) == {"n1": -12, "n2": -12}
    assert all(abs(s) <= 5 for p in range(50) for s in draw_offsets(["n1"], {"pick": p, "max_s": 5}).values())


def test_only_the_clock_faults_need_libfaketime_and_the_mix_draws_them_from_its_clock_family():
    assert nemesis.needs_faketime(("clock-skew",)) and nemesis.needs_faketime(("kill", "clock-strobe:all"))
    assert not nemesis.needs_faketime(("kill", "partition-leader", "cpu-starve", "none"))
    assert nemesis.needs_faketime(("mix",), ("process", "clock"))
    assert not nemesis.needs_faketime(("mix",), ("process", "network", "page-cache", "slow"))
    drawn = {c.package.name: c.kinds for c in mix.choices(("clock",))}
    assert set(drawn) == {"clock-skew", "clock-strobe"} and all("all" not in k for k in drawn.values())
    cfg = TestConfig(time_limit=300, nemesis=NemesisConfig(names=("mix",), mix_families=("clock",)))
    ops = mix.schedule(cfg)
    assert ops and {o.nemesis.split(":")[0] for o in ops} <= {"clock-skew", "clock-strobe"}
    assert not nemesis.needs_lazyfs(("clock-skew", "clock-strobe"))


def test_an_external_kafka_refuses_a_mix_with_clock_faults(tmp_path):
    from test_build import cfg, hosts_file
    c = cfg(tmp_path, hosts_file(tmp_path, external=True), ("mix",))
    c = c.with_(nemesis=NemesisConfig(names=("mix",), mix_families=("process", "clock")))
    with pytest.raises(ConfigError, match="clock family"):
        preflight(c)


@pytest.fixture
def node(tmp_path):
    """fault-ctl in a directory of its own, its run directory under tmp_path."""
    shutil.copy2(FAULT_CTL, tmp_path / "fault-ctl")
    (tmp_path / "node.env").write_text(f"KCHAOS_RUN={tmp_path}/run\nKCHAOS_CONF={tmp_path}/conf\n")

    def run(*args):
        r = subprocess.run([str(tmp_path / "fault-ctl"), *args], capture_output=True, text=True, timeout=20)
        return r.returncode, r.stdout.strip()
    yield run, tmp_path / "run" / "kchaos-clock"
    run("unclock")


@pytest.mark.parametrize("args", [("clock", "30s"), ("clock", ""), ("clock", "1.5"), ("clock-strobe", "0", "5", "0"),
                                  ("clock-strobe", "0", "x", "1"), ("clock-strobe", "0", "5", "0.5")])
def test_fault_ctl_refuses_malformed_clock_arguments(node, args):
    run, clock = node
    code, out = run(*args)
    assert code == 2 and out and not clock.exists()


def test_fault_ctl_sets_the_offset_strobes_it_and_unclock_stops_both(node):
    run, clock = node
    assert run("clock", "-45") == (0, "clock offset -45 s") and clock.read_text() == "-45\n"
    assert run("clock", "+7")[0] == 0 and clock.read_text() == "+7\n"
    code, out = run("clock-strobe", "0", "12", "1")
    assert code == 0 and "strobing between 0 s and 12 s every 1 s" in out
    seen = set()
    for _ in range(14):  # 3.5 s: each offset holds a second
        seen.add(clock.read_text())
        time.sleep(0.25)
    assert seen == {"+0\n", "+12\n"}
    assert "process clock-loop" in run("status")[1]
    assert run("unclock") == (0, "clock offset 0")
    assert "clock-loop" not in run("status")[1] and clock.read_text() == "+0\n"
    time.sleep(1.5)
    assert clock.read_text() == "+0\n"  # the loop is gone for good


@pytest.mark.parametrize("names, families, faketime", [
    (("clock-skew",), (), True),
    (("kill", "clock-strobe"), (), True),
    (("mix",), ("process", "clock"), True),
    (("kill-leader",), (), False),
    (("mix",), ("process", "network"), False),
])
def test_only_a_run_that_may_take_a_clock_fault_runs_kafka_under_libfaketime(tmp_path, names, families, faketime):
    cfg = preflight(TestConfig(store=str(tmp_path / "results"),
                               nemesis=NemesisConfig(names=names, mix_families=families or ("process",))))
    assert cfg.cluster.faketime is faketime
    assert cfg.to_dict()["cluster"]["faketime"] is faketime


@pytest.mark.parametrize("on", [True, False])
def test_kafka_ctl_preloads_libfaketime_only_when_told(tmp_path, on):
    node = tmp_path / "bin"
    node.mkdir()
    shutil.copy(FAULT_CTL.with_name("kafka-ctl"), node / "kafka-ctl")
    lib = tmp_path / "libfaketime.so.1"
    lib.write_bytes(b"")
    java = tmp_path / "java"
    java.write_text('#!/bin/sh\necho "LD_PRELOAD=${LD_PRELOAD:-}"\n')
    java.chmod(0o755)
    env = {"KCHAOS_CONF": tmp_path / "conf", "KCHAOS_DATA": tmp_path / "data", "KCHAOS_RUN": tmp_path / "run",
           "KCHAOS_LIBS": tmp_path / "libs", "JAVA": java, "KCHAOS_FAKETIME": lib,
           **({"KCHAOS_CLOCK_FAULTS": "1"} if on else {})}
    (tmp_path / "conf").mkdir()
    (node / "node.env").write_text("".join(f"export {k}={v}\n" for k, v in env.items()))
    out = subprocess.run([str(node / "kafka-ctl"), "start"], capture_output=True, text=True, timeout=30).stdout
    assert ("libfaketime" in out) is on, out
    for _ in range(50):  # the fake java runs detached; its line lands in stdout.log
        log = (tmp_path / "conf" / "stdout.log").read_text()
        if "LD_PRELOAD=" in log:
            break
        time.sleep(0.1)
    assert (f"LD_PRELOAD={lib}" in log) is on, log
