"""The txn workload in subscribe mode under crash-client: one group, rebalances recorded, producers fenced by their
replacements (same transactional.id), and read_committed still keeps every promise."""
import json

import pytest

from checkers.txn_history import parse
from checkers.txn_order import order_anomalies, version_order
from core.history import read_history
from runs import finished_run
from txn_asserts import ALLOWED_READ_COMMITTED

pytestmark = pytest.mark.cluster


def test_txn_subscribe_under_crash_client_is_valid_and_its_rebalances_excuse_the_jumps(store):
    run, results = finished_run(store, "txnsub", [
        "--workload", "txn", "--consumer-mode", "subscribe", "--nemesis", "crash-client", "--interval", "6",
        "--restart-delay", "2", "--time-limit", "30", "--rate", "40", "--txn-sub-p", "0.02", "--seed", "23"],
        timeout=600)
    assert results["verdict"] == "pass" and set(results["allowed"]) <= ALLOWED_READ_COMMITTED, results["allowed"]
    assert not any(n for kind, n in results["counts"].items() if kind not in ALLOWED_READ_COMMITTED), results["counts"]
    ops = list(read_history(run / "history.jsonl"))
    rebalances = [o for o in ops if o["f"] == "rebalance"]
    assert any(o["assigned"] and o.get("generation") is not None for o in rebalances)
    assert any(o["revoked"] for o in rebalances)
    # A crashed process's next committed transaction ran on a new producer of the same transactional.id, whose
    # init_transactions fenced the abandoned one.
    crashes = [o for o in ops if o["f"] == "crash" and o["type"] == "info" and isinstance(o["process"], int)]
    assert any(any(later["process"] == c["process"] and later["f"] == "txn" and later["type"] == "ok"
                   for later in ops[c["index"]:]) for c in crashes), "no crashed process committed again"
    assert {o["f"] for o in ops if o["type"] == "ok"} >= {"assign", "subscribe"}, "no sub-p op"
    test = json.loads((run / "test.json").read_text())
    assert test["workload"]["consumer_mode"] == "subscribe" and "group_commit" not in test["workload"]
    # Read without the rebalance lines, the same history has jumps: the rebalances are what excuse them.
    parsed = parse(run / "history.jsonl")
    log = version_order(parsed)
    parsed.rebalances = []
    jumps = order_anomalies(parsed, log)
    assert jumps["poll_skip"] or jumps["nonmonotonic_poll"], "no poll jumped across a rebalance"
