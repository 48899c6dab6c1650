"""`--rate max`: the producer pipeline picked from the machine's cores, explicit options winning,
the pick recorded in the config and test.json, in suite cells as on the command line, and described in help."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from kchaos.core.config import ConfigError, TestConfig, validate
from kchaos.harness import full_load
from kchaos.harness.cli.main import build_parser, main
from kchaos.harness.options import config_from_args
from kchaos.harness.suites.suite import load_suite
from kchaos.nemesis import check_spec


def cfg(*argv: str) -> TestConfig:
    return validate(config_from_args(build_parser().parse_args(["run", "--seed", "1", *argv])), check_spec)


@pytest.fixture
def cores(monkeypatch):
    """Pretend this process may run on `n` cores."""
    def set_(n: int) -> None:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)))
    return set_


@pytest.fixture
def no_jdk(monkeypatch):
    """Pretend no JDK is on PATH."""
    real = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: None if name in ("java", "javac") else real(name, *a, **k))


@pytest.mark.parametrize("n, processes", [(1, 1), (2, 2), (6, 6), (64, full_load.MAX_PROCESSES)])
def test_cores_decide_the_processes(cores, no_jdk, n, processes):
    cores(n)
    c = cfg("--rate", "max")
    w = c.workload
    assert (w.rate, w.client, w.producer_processes, w.producers) == ("max", "python", processes, processes)
    assert (w.in_flight, c.producer.linger_ms) == (full_load.IN_FLIGHT, full_load.LINGER_MS)
    assert w.full_load["cores"] == n and w.full_load["explicit"] == []
    assert f"on {n} core" in w.full_load["why"] and f"--producer-processes {processes}" in w.full_load["why"]
    assert "--client python" in w.full_load["why"]


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK on PATH")
def test_with_a_jdk_the_queue_producers_run_on_the_java_client(cores):
    cores(2)
    w = cfg("--rate", "max").workload
    assert (w.client, w.producer_processes, w.producers, w.in_flight) == ("java", 0, 2, full_load.IN_FLIGHT)
    assert w.client_version is not None
    assert w.full_load["why"] == "--rate max on 2 cores: --client java, --producers 2, --in-flight 20000, --linger-ms 5"
    # the user's choice of client or of worker processes keeps librdkafka
    assert cfg("--rate", "max", "--client", "python").workload.client == "python"
    w = cfg("--rate", "max", "--producer-processes", "1").workload
    assert (w.client, w.producer_processes) == ("python", 1)
    assert full_load.pick(2, {}, java=False)["picked"]["client"] == "python"  # no JDK, or not the queue workload
    assert cfg("--client", "java").workload.client == "java"


def test_java_producers_take_no_worker_processes():
    with pytest.raises(ConfigError, match="--producer-processes runs librdkafka producers"):
        cfg("--client", "java", "--producers", "2", "--producer-processes", "2")


def test_explicit_options_win(cores, no_jdk):
    cores(4)
    w = cfg("--rate", "max", "--in-flight", "50", "--linger-ms", "0").workload
    assert (w.in_flight, w.producer_processes, w.producers) == (50, 4, 4)
    assert w.full_load["explicit"] == ["in_flight", "linger_ms"]
    assert "(yours: --in-flight 50, --linger-ms 0)" in w.full_load["why"]
    assert cfg("--rate", "max", "--linger-ms", "0").producer.linger_ms == 0
    # fewer producers than cores: one process each, never more processes than producers
    w = cfg("--rate", "max", "--producers", "3").workload
    assert (w.producers, w.producer_processes) == (3, 3)
    # threads of the harness, as asked; the instances still follow the cores
    w = cfg("--rate", "max", "--producer-processes", "0").workload
    assert (w.producers, w.producer_processes, w.in_flight) == (4, 0, full_load.IN_FLIGHT)


def test_without_max_nothing_is_picked(cores):
    cores(8)
    c = cfg()
    d = TestConfig()
    assert (c.workload.producers, c.workload.producer_processes, c.workload.in_flight, c.producer.linger_ms) == \
        (d.workload.producers, d.workload.producer_processes, d.workload.in_flight, d.producer.linger_ms)
    assert c.workload.full_load is None and c.to_dict()["workload"]["full_load"] is None
    assert cfg("--rate", "250", "--in-flight", "7").workload.in_flight == 7


def test_the_pick_is_recorded_and_read_back_unchanged_on_another_machine(cores, no_jdk):
    cores(2)
    c = cfg("--rate", "max", "--producers", "2")
    recorded = json.loads(json.dumps(c.to_dict()))
    assert recorded["workload"]["rate"] == "max"
    assert recorded["workload"]["full_load"]["picked"] == {"client": "python", "producer_processes": 2, "producers": 2,
                                                           "in_flight": full_load.IN_FLIGHT, "linger_ms": 5}
    cores(16)  # a rerun from test.json keeps the recorded numbers: nothing is picked again
    again = TestConfig.from_dict(recorded)
    assert again == c and again.workload.producer_processes == 2


@pytest.mark.parametrize("rate, needle", [("fast", "must be a number of sends per second or max, got 'fast'"),
                                          ("-5", "--rate must be a positive number or max"),
                                          ("0", "--rate must be a positive number or max"),
                                          ("inf", "--rate must be a positive number or max")])
def test_bad_rates_are_one_line_and_exit_3(rate, needle, refused_run):
    refused_run([f"--rate={rate}"], needle)


def test_a_bad_rate_in_test_json_is_refused():
    d = TestConfig().to_dict()
    d["workload"]["rate"] = "fast"
    with pytest.raises(ConfigError, match="--rate"):
        TestConfig.from_dict(d)


def test_a_suite_cell_takes_rate_max(tmp_path, cores, no_jdk):
    cores(3)
    path = tmp_path / "s.yaml"
    path.write_text("base: {time_limit: 30}\nmatrix:\n  rate: [100, max]\ninclude:\n  - {rate: max, in_flight: 9}\n")
    s = load_suite(path)
    slow, full, mine = (s.config(c, 1, tmp_path, "local[2]").workload for c in s.cells)
    assert (slow.rate, slow.producer_processes, slow.full_load) == (100, 0, None)
    assert (full.rate, full.producer_processes, full.producers, full.in_flight) == ("max", 3, 3, full_load.IN_FLIGHT)
    assert (mine.in_flight, mine.producer_processes, mine.full_load["explicit"]) == (9, 3, ["in_flight"])
    path.write_text("matrix:\n  rate: [100, fast]\n")
    with pytest.raises(ConfigError, match=r"s.yaml:2: matrix.rate\[1\]: .*'fast'"):
        load_suite(path)


def test_run_help_says_what_max_picks_here(cores, no_jdk, capsys):
    cores(2)
    assert main(["run", "--help-all"]) == 0
    lines = {line.split()[0]: " ".join(line.split()) for line in capsys.readouterr().out.splitlines()
             if line.startswith("  --")}
    assert ("here, 2 cores, for the queue workload: --client python, --producer-processes 2, --producers 2, "
            "--in-flight 20000, --linger-ms 5") in lines["--rate"]
    for flag in ("--producers", "--in-flight", "--producer-processes", "--linger-ms"):
        assert "--rate max picks it" in lines[flag], lines[flag]
