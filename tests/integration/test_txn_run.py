"""The txn workload against a real cluster: kill-leader under read_committed keeps every transaction's promise."""
import pytest

from txn_asserts import valid_txn_run

pytestmark = pytest.mark.cluster


def test_txn_under_kill_leader_is_valid_read_committed(store):
    test = valid_txn_run(store, "txn", ["--time-limit", "25", "--rate", "40"], min_committed=50)
    assert test["workload"]["kind"] == "txn" and test["workload"]["txn_isolation"] == "read_committed"
