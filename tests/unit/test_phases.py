"""Where a run's time goes: each phase timed, the fixed cost (everything but the workload) apart."""
from __future__ import annotations

import json

import pytest

from kchaos.harness.phases import PHASES_FILE, WORKLOAD, Phases


def test_phases_are_kept_in_order_and_one_entered_twice_adds_up(tmp_path):
    timer = Phases()
    for name in ("cluster start", WORKLOAD, "heal", "check", "heal"):
        with timer.phase(name):
            pass
    with pytest.raises(RuntimeError), timer.phase("report"):
        raise RuntimeError("a phase that raised is timed all the same")
    rec = timer.record()
    assert list(rec["phases"]) == ["cluster start", WORKLOAD, "heal", "check", "report"]
    assert rec["fixed_s"] == pytest.approx(rec["total_s"] - rec["phases"][WORKLOAD], abs=0.11)
    timer.write(tmp_path)
    assert json.loads((tmp_path / PHASES_FILE).read_text())["phases"].keys() == rec["phases"].keys()
    line = timer.line()
    assert line.startswith("time: cluster start ") and "report" in line and line.endswith("besides the workload")


def test_the_fixed_cost_leaves_out_the_workload_only():
    timer = Phases()
    timer.seconds.update({"cluster start": 9.0, WORKLOAD: 60.0, "check": 2.0})
    assert timer.fixed() == pytest.approx(timer.total() - 60.0)
