"""End-to-end runs through the CLI against a real 3-node Kafka 3.7 cluster."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.history import read_history

pytestmark = pytest.mark.cluster


def kchaos_run(store: Path, *args: str) -> tuple[int, Path, dict]:
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=900)
    latest = (store / "latest").resolve()
    assert (latest / "history.jsonl").exists(), proc.stderr[-2000:]
    results = json.loads((latest / "results.json").read_text()) if (latest / "results.json").exists() else {}
    assert results, proc.stderr[-2000:]
    return proc.returncode, latest, results


def test_acks_all_without_faults_reads_every_acked_value(store):
    code, run, res = kchaos_run(store, "--name", "nofaults", "--nemesis", "none", "--acks", "all",
                                "--time-limit", "15", "--rate", "80", "--seed", "3")
    assert code == 0 and res["valid"] is True
    c = res["counts"]
    assert c["acked"] > 500
    assert c["lost"] == c["unseen"] == c["unexpected"] == c["inconsistent_offset"] == 0
    # Every acked value was read by some poll or the drain: recompute from the raw history.
    hist = list(read_history(run / "history.jsonl"))
    acked = {r["value"] for r in hist if r["f"] == "send" and r["type"] == "ok"}
    read = {v for r in hist if r["type"] == "ok" and r["f"] in ("poll", "drain") for _, _, v in r["records"]}
    assert acked and acked <= read
    assert len(acked) == c["acked"]
    # The run directory holds everything needed to understand and rerun it.
    test = json.loads((run / "test.json").read_text())
    assert test["seed"] == 3 and test["versions"]["kafka"] == "3.7.2" and test["argv"][0] == "kchaos"
    for node in ("n1", "n2", "n3"):
        props = (run / "nodes" / node / "server.properties").read_text()
        assert "process.roles=broker,controller" in props
        assert (run / "nodes" / node / "server.log").stat().st_size > 0
    assert (run / "harness.log").exists() and (store / "latest").is_symlink()


def test_kill_leader_with_acks_all_min_insync_2_loses_nothing(store):
    code, run, res = kchaos_run(store, "--name", "killleader", "--nemesis", "kill-leader", "--acks", "all",
                                "--rf", "3", "--min-insync", "2", "--time-limit", "40", "--interval", "10",
                                "--restart-delay", "4", "--rate", "80", "--seed", "11")
    hist = list(read_history(run / "history.jsonl"))
    kills = [r for r in hist if r["process"] == "nemesis" and r["f"] == "kill" and r["type"] == "ok"]
    assert len(kills) >= 3, "the nemesis should have killed a leader several times"
    assert all(k["nodes"][0] in ("n1", "n2", "n3") and k["targets"] == k["nodes"] for k in kills)
    # Sync producers stall on a killed leader's partitions until it is fenced (9 s), so with a kill
    # every ~10 s a good share of the 40 s goes by without acks; a few hundred remain.
    assert res["counts"]["acked"] > 400
    assert res["counts"]["lost"] == 0 and res["counts"]["unseen"] == 0
    assert res["valid"] is True and code == 0
