"""Consumer groups against a real cluster: three members, one crashed and replaced, sync commits keep at-least-once."""
import json

import pytest
from runs import finished_run, held

from kchaos.core.history import read_history

pytestmark = pytest.mark.cluster


def test_subscribe_with_a_crashed_member_is_valid_with_sync_commits(store):
    run, results = finished_run(store, "groups", [
        "--consumer-mode", "subscribe", "--consumers", "3", "--nemesis", "crash-client", "--interval", "8",
        "--restart-delay", "2", "--time-limit", "22", "--rate", "100", "--producers", "2", "--seed", "29"])
    assert held(results), results
    # checked on the session's warm Spark (conftest.py's warm_check), which started none for this run
    assert "checking the history on the warm Spark of kchaos serve" in (run / "harness.log").read_text()
    counts = results["counts"]
    assert counts["poll_skip"] == counts["nonmonotonic_poll"] == counts["committed_unconsumed"] == 0, counts
    ops = list(read_history(run / "history.jsonl"))
    crashes = [o for o in ops if o["process"] == "nemesis" and o["f"] == "crash" and o["type"] == "ok"]
    assert crashes, "crash-client never crashed a member"
    assigns = [o for o in ops if o["f"] == "assign" and o["type"] == "ok"]
    assert {o["process"] for o in assigns} >= {2, 3, 4}, "every member was assigned partitions"
    assert len({o["generation"] for o in assigns}) >= 2, "at least one rebalance"
    assert any(o["f"] == "revoke" for o in ops)
    assert any(o["f"] == "poll" and o["type"] == "info" and "crashed" in o.get("error", "") for o in ops)
    assert any(o["f"] == "commit" and o["type"] == "ok" for o in ops)
    committed = [o for o in ops if o["f"] == "committed" and o["type"] == "ok"]
    assert sorted(o["partition"] for o in committed) == [0, 1, 2] and all("offset" in o for o in committed)
    polled = [o for o in ops if o["f"] == "poll" and o["type"] == "ok" and o["records"]]
    assert polled and all("generation" in o for o in polled)
    test = json.loads((run / "test.json").read_text())
    assert test["workload"]["consumer_mode"] == "subscribe" and test["workload"]["options"]["group_commit"] == "sync"
