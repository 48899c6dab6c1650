"""What a lossy run prints: its explanation comes grouped by cause, within a line budget, however much it lost."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cluster
KCHAOS = [sys.executable, "-m", "harness.cli"]
# Setup and progress (~10 lines), the explanation (5 groups of 3 lines and "… N more groups"), "report:", the
# summary (~17 lines), a few warnings. Before groups, a demo-shaped acks=1 run printed 10,850 lines.
LINE_BUDGET = 60


def test_a_lossy_acks1_run_explains_its_loss_in_a_few_groups(store, tmp_path):
    # The partition-0 leader is cut off from the other brokers for 16 s while 4 producers reach it: with acks=1 it
    # acknowledges hundreds of writes alone, on every partition it leads, and truncates them when healed.
    schedule = tmp_path / "isolated-leader.json"
    schedule.write_text(json.dumps([
        {"at": 4, "nemesis": "partition-leader", "op": {"f": "start-partition", "target": "leader", "partition": 0}},
        {"at": 20, "nemesis": "partition-leader", "op": {"f": "stop-partition"}}]))
    # A wide console: the budget counts kchaos's lines, not a terminal's wrapping of them.
    env = {**os.environ, "COLUMNS": "10000"}
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", "lossy", "--acks", "1",
                           "--partitions", "3", "--schedule", str(schedule), "--time-limit", "26", "--rate", "200",
                           "--producers", "4", "--seed", "7"], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]  # acks=1 allows the loss: pass (docs/verdicts.md)
    run = (store / "latest").resolve()
    lost = json.loads((run / "results.json").read_text())["counts"]["lost"]
    assert lost > 50, f"the isolated leader lost only {lost} writes: nothing to group"
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= LINE_BUDGET, "\n".join(lines)
    why = [i for i, line in enumerate(lines) if line.startswith("• why: ")]
    assert 1 <= len(why) <= 5, "\n".join(lines)
    for i in why:  # each group: its "why:" line and at most two more, indented under it
        more = 0
        while i + 1 + more < len(lines) and lines[i + 1 + more].startswith("•      "):
            more += 1
        assert more <= 2, "\n".join(lines[i:i + 1 + more])
    groups = json.loads((run / "evidence" / "explanation.json").read_text())["groups"]
    assert sum(g["values"] for g in groups) <= lost and len(why) == min(5, len(groups))
    assert (len(groups) > 5) == any(line.startswith("• … ") and "kchaos explain" in line for line in lines)
    assert (run / "report.html").stat().st_size < 600_000
