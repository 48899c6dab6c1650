"""The copy workload against a real cluster: two transactional copiers, one crashed mid-transaction and replaced
(its producer fenced by the next with the same transactional.id), copy the input exactly once."""
import pytest
from runs import assert_a_copier_crashed_and_was_replaced, finished_run, held

from kchaos.core.history import read_history

pytestmark = pytest.mark.cluster
KINDS = ("copy_missing", "copy_duplicate", "copy_invented", "copy_reordered")


def test_copy_under_crash_client_keeps_input_equal_to_output(store):
    run, results = finished_run(store, "copy", [
        "--workload", "copy", "--consumers", "2", "--nemesis", "crash-client", "--interval", "8",
        "--restart-delay", "2", "--time-limit", "16", "--rate", "150", "--copy-records", "1200", "--txn-size", "20",
        "--seed", "31"])
    assert held(results), results
    counts = results["counts"]
    assert all(counts[k] == 0 for k in KINDS), counts
    assert counts["input"] == 1200 and counts["output"] >= counts["input"], counts
    ops = list(read_history(run / "history.jsonl"))
    assert_a_copier_crashed_and_was_replaced(ops)
    assigns = [o for o in ops if o["f"] == "assign" and o["type"] == "ok"]
    assert len({o["generation"] for o in assigns}) >= 2, "at least one rebalance"
    assert sum(1 for o in ops if o["f"] == "fill" and o["type"] == "ok") == 2  # 1200 values, 1000 a fill op
