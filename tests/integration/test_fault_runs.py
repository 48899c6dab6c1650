"""Whole runs with the nemesis catalogue through the CLI, interrupted: a SIGKILLed harness (its faults left on
the nodes, its producer processes gone with it) and `kchaos cleanup`, Ctrl-C and SIGTERM. (A composed schedule
replayed from its file is test_scenarios.py's last-isr-power-loss run.)"""
import json
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
from kchaos.core.send_stream import PARTS_DIR, iter_stream

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


def test_sigkilled_harness_leaves_its_faults_and_a_readable_history_but_no_workers_then_check_and_cleanup(store):
    """The harness alone SIGKILLed, as the OOM killer would, mid-fault and with its sends streamed by producer
    processes: the faults outlive it on the nodes, its worker processes do not, the history reads, `kchaos check`
    merges the workers' streams into it, and `kchaos cleanup` removes everything. (--rate max, so that the run also
    records the producer pipeline that full load picked around the options given.)"""
    proc = _start_run(store, "--nemesis", "partition-halves,slow-follower:followers:1", "--rate", "max",
                      "--in-flight", "10", "--producers", "2", "--producer-processes", "2")
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            parts = list((latest(store) / PARTS_DIR).glob("*.arrows")) if (store / "latest").exists() else []
            if len(parts) == 2 and all(_acked_in(p) for p in parts):  # what the kill cuts off has acks in it
                break
            time.sleep(1)
        else:
            pytest.fail("the producer processes streamed no acknowledged send")
        hist = _wait_for_fault(store, "start-partition")
        _wait_for_fault(store, "start-slow")
        workers = _children(proc.pid)
        assert len(workers) >= 2
        os.kill(proc.pid, signal.SIGKILL)  # the harness alone: its workers must go by themselves
        proc.wait(10)
        gone_by = time.monotonic() + 30
        while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < gone_by:
            time.sleep(0.1)
        assert not [w for w in workers if Path(f"/proc/{w}").exists()]
        ops = list(read_history(hist))  # tolerated: a last line cut mid-write
        assert any(o["f"] == "start-partition" and o["type"] == "ok" for o in ops)
        rules = "".join(_rules(n) for n in ("n1", "n2", "n3"))
        assert "DROP" in rules and "htb" in rules  # the faults outlived the harness...
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run = latest(store)
    checked = subprocess.run([*KCHAOS, "check", str(run)], capture_output=True, text=True, timeout=600)
    assert checked.returncode in (0, 1, 2), checked.stderr[-2000:]
    assert not (run / PARTS_DIR).exists()
    sends = [o for o in read_history(run / "history.jsonl") if o["f"] == "send"]
    assert {o["producer"] for o in sends} == {0, 1}
    assert json.loads((run / "results.json").read_text())["counts"]["acked"] > 0
    test = json.loads((run / "test.json").read_text())
    assert (test["workload"]["rate"], test["producer"]["linger_ms"]) == ("max", 5)
    assert test["workload"]["full_load"]["explicit"] == ["producer_processes", "producers", "in_flight"]
    cleaned = subprocess.run([*KCHAOS, "cleanup"], capture_output=True, text=True, timeout=120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert _containers() == []  # ...and died with the containers that held them
    assert docker.from_env().networks.list(filters={"label": LABEL}) == []
    host = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    assert "KCHAOS" not in host  # nothing was ever installed on the host


def _acked_in(part: Path) -> int:
    """Acknowledged sends in the complete batches a producer process has streamed so far."""
    _, batches = iter_stream(part)
    return sum(b.column("type").to_pylist().count("ok") for b in batches)


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


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
