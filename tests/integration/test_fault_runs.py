"""Whole runs with the nemesis catalogue through the CLI, interrupted: a SIGKILLed harness and `kchaos cleanup`,
Ctrl-C and SIGTERM. (A composed schedule replayed from its file is test_scenarios.py's last-isr-power-loss run.)"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
from signals import sigint_default, sigint_ignored

from kchaos.clusters.engine import LABEL
from kchaos.core.history import read_history

pytestmark = pytest.mark.cluster
KCHAOS = [sys.executable, "-m", "kchaos"]


def latest(store: Path) -> Path:
    return (store / "latest").resolve()


def _containers():
    client = docker.from_env()
    return client.containers.list(all=True, filters={"label": LABEL})


def _start_run(store: Path, *args: str, preexec=sigint_default) -> subprocess.Popen:
    return subprocess.Popen([*KCHAOS, "run", "--store", str(store), "--time-limit", "120", "--rate", "50",
                             "--seed", "4", "--interval", "4", "--jitter", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=preexec)


def _wait_for_fault(store: Path, f: str, timeout: float = 180) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        h = latest(store) / "history.jsonl" if (store / "latest").exists() else None
        if h and h.exists() and any(o["f"] == f and o["type"] == "ok" for o in read_history(h)):
            return h
        time.sleep(1)
    pytest.fail(f"no {f} within {timeout}s")


def _rules(node: str) -> str:
    c = docker.from_env().containers.get(f"kchaos-{node}")
    return c.exec_run(["fault-ctl", "status"]).output.decode()


def test_killed_harness_leaves_a_readable_history_and_cleanup_removes_every_fault(store):
    proc = _start_run(store, "--nemesis", "partition-halves,slow-follower:followers:1")
    try:
        hist = _wait_for_fault(store, "start-partition")
        _wait_for_fault(store, "start-slow")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        ops = list(read_history(hist))  # tolerated: a last line cut mid-write
        assert any(o["f"] == "send" and o["type"] == "ok" for o in ops)
        rules = "".join(_rules(n) for n in ("n1", "n2", "n3"))
        assert "DROP" in rules and "htb" in rules  # the faults outlived the harness...
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    cleaned = subprocess.run([*KCHAOS, "cleanup"], capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert _containers() == []  # ...and died with the containers that held them
    assert docker.from_env().networks.list(filters={"label": LABEL}) == []
    host = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert "KCHAOS" not in host  # nothing was ever installed on the host


@pytest.mark.parametrize("preexec, sig", [(sigint_default, signal.SIGINT), (sigint_ignored, signal.SIGTERM)],
                         ids=["ctrl-c", "sigterm-from-cron"])
def test_interrupted_run_heals_records_and_tears_down(store, preexec, sig):
    """Ctrl-C from a terminal, or SIGTERM to a harness started with SIGINT ignored (cron, nohup, `&`)."""
    proc = _start_run(store, "--nemesis", "pause", preexec=preexec)
    try:
        hist = _wait_for_fault(store, "pause")
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    ops = list(read_history(hist))
    heals = [o for o in ops if o["f"] == "heal" and o["process"] == "nemesis"]
    assert [o["type"] for o in heals] == ["invoke", "ok"]
    assert _containers() == []
