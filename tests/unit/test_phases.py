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


def test_a_typical_fixed_cost_is_the_median_of_the_stores_newest_runs(tmp_path):
    from kchaos.harness.phases import FIXED_S_GUESS, RECENT, typical_fixed
    assert typical_fixed(tmp_path / "none") == (FIXED_S_GUESS, 0)
    for i, fixed in enumerate([30.0, 10.0, 12.0, 11.0]):  # runs alone and in a suite alike
        run = tmp_path / ("suites/s/20261129T000000.000Z/cell" if i % 2 else "queue") / f"2026112{i}T000000.000Z"
        run.mkdir(parents=True)
        (run / PHASES_FILE).write_text(json.dumps({"phases": {}, "total_s": 99.0, "fixed_s": fixed}))
    (tmp_path / "queue" / "broken").mkdir()
    (tmp_path / "queue" / "broken" / PHASES_FILE).write_text("{")  # a run killed while writing it: skipped
    assert typical_fixed(tmp_path) == (12.0, 4)
    assert RECENT >= 4


def test_a_cluster_that_did_not_recover_is_said_in_one_line_with_kafkas_first_error():
    from kchaos.harness.runner import _first_words

    tail = ("n2: Kafka exited during startup:\n[server.log]\n[2026-11-29 09:07:52,306] INFO Loading logs\n"
            "[2026-11-29 09:07:52,306] ERROR Error while reading checkpoint file /d/p-2/leader-epoch-checkpoint "
            "(LogDirFailureChannel)\n[2026-11-29 09:07:52,447] ERROR Shutdown broker because all log dirs in /d "
            "have failed (kafka.log.LogManager)")
    assert _first_words(tail) == ("n2: Kafka exited during startup (Error while reading checkpoint file "
                                  "/d/p-2/leader-epoch-checkpoint (LogDirFailureChannel))")
    assert _first_words("topic kchaos not fully in sync on n1 after 60s: {0: (3, 1)}") == \
        "topic kchaos not fully in sync on n1 after 60s: {0: (3, 1)}"
