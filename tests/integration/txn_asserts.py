"""One txn run through the command line, checked the same way whichever client ran it."""
import json
from pathlib import Path
from typing import Any

from runs import assert_done_around_the_faults, assert_each_fault_struck_ops_in_flight, finished_run, held, is_commit

from kchaos.core.history import read_history

ALLOWED_READ_COMMITTED = {"G0", "G1c", "int_send_skip"}


def valid_txn_run(store: Path, name: str, options: list[str], nemesis: str = "kill-leader") -> dict[str, Any]:
    """Run `kchaos run --workload txn --nemesis NEMESIS` (kill-leader among them) with `options`; assert it passed
    with no anomaly but those read_committed allows, transactions committed before the first fault and after the
    nemesis's last op, some aborted, every partition read to its end, every kill struck with transactions in
    flight, and a committed poll that returned records; return test.json with the history's ops under "_ops" and
    the run directory under "_run"."""
    run, results = finished_run(store, name, ["--workload", "txn", "--nemesis", nemesis, "--interval", "8",
                                              "--txn-abort-p", "0.2", "--seed", "23", *options])
    # Under read_committed Kafka allows only these (docs/verdicts.md): concurrent transactions' sends interleave.
    assert held(results) and set(results["allowed"]) <= ALLOWED_READ_COMMITTED, results["allowed"]
    assert not any(n for kind, n in results["counts"].items() if kind not in ALLOWED_READ_COMMITTED), results["counts"]
    stats = results["stats"]
    assert stats["txn_fail"] > 0, stats
    assert stats["partitions_incomplete"] == [] and stats["committed_sends"] > 0
    ops = list(read_history(run / "history.jsonl"))
    # Commits on both sides of the faults, not a number of them: how many fit in the run is the machine's speed.
    assert_done_around_the_faults(ops, is_commit, "committed transaction")
    assert_each_fault_struck_ops_in_flight(ops, "kill", "txn")
    polled = [m for o in ops if o["f"] == "txn" and o["type"] == "ok" for m in o["value"] if m[0] == "poll" and m[1]]
    assert polled, "no poll inside a committed transaction returned a record"
    return {**json.loads((run / "test.json").read_text()), "_harness_log": (run / "harness.log").read_text(),
            "_ops": ops, "_run": run}
