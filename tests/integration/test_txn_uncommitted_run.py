"""The txn workload's polls under read_uncommitted on a real cluster: they return values of transactions that
then abort. The checker counts each as an `aborted_read`, observed and allowed (read_uncommitted promises no
isolation), never as the `G1a` it would be under read_committed, and the run passes."""
import pytest
from runs import finished_run, held

pytestmark = pytest.mark.cluster


def test_read_uncommitted_polls_see_aborted_values_which_pass_as_observed_allowed(store):
    run, results = finished_run(store, "txn-uncommitted", [
        "--workload", "txn", "--txn-isolation", "read_uncommitted", "--txn-abort-p", "0.4", "--nemesis", "none",
        "--time-limit", "12", "--rate", "60", "--seed", "41"])
    counts = results["counts"]
    assert held(results) and counts["aborted_read"] > 0, counts
    assert results["allowed"]["aborted_read"] == counts["aborted_read"] and "aborted_read" not in results["failed"]
    assert counts["G1a"] == 0 and "read_uncommitted" in results["why"]["allowed"]["aborted_read"]
    assert results["stats"]["txn_fail"] > 0 and results["stats"]["partitions_incomplete"] == []
