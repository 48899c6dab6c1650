"""A real run that tested nothing is never a pass: every transaction aborted, so nothing was acknowledged, and the
one fault it was asked for never fired (the ISR it waited for never shrank). The verdict is unknown, with both
reasons, on the console, in results.json, in report.html and in the exit code; and the nodes' own logs were read."""
import json
import subprocess

import pytest
from runs import KCHAOS

pytestmark = pytest.mark.cluster

# A kill that fires only once partition 0's ISR is down to one replica: in a healthy cluster it never is.
SCHEDULE = [{"at": 2, "nemesis": "kill-leader",
             "op": {"f": "kill", "target": "leader", "partition": 0, "await_isr": 1, "await_s": 4}}]


def test_a_run_that_acknowledged_nothing_and_applied_no_fault_is_unknown(store, tmp_path):
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps(SCHEDULE))
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", "nothing-tested", "--workload", "txn",
                           "--txn-abort-p", "1", "--time-limit", "9", "--rate", "20", "--schedule", str(schedule)],
                          capture_output=True, text=True, timeout=900)
    run = (store / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert proc.returncode == 2, (results.get("verdict"), results.get("undecided"), proc.stderr[-3000:])
    assert results["stats"]["txn_fail"] > 0 and results["stats"]["committed_sends"] == 0
    assert results["nemesis"]["asked"] == ["kill-leader"] and results["nemesis"]["applied"] == 0
    assert results["nemesis"]["not_applied"] == 1
    nothing = "nothing was acknowledged, so nothing could be lost"
    assert results["verdict"] == "unknown" and nothing in results["undecided"]
    no_fault = next(u for u in results["undecided"] if u.startswith("the nemesis (kill-leader) was asked"))
    assert "did not shrink" in no_fault, no_fault
    assert nothing in proc.stdout + proc.stderr
    page = (run / "report.html").read_text()
    assert ">unknown<" in page and nothing in page and "the nemesis (kill-leader) was asked" in page
    assert results["history"]["unparsed_lines"] == 0
    # Every node's own logs were read (server.log and state-change.log), whatever they held.
    logged = results["kafka_errors"]
    assert logged["files"] >= 6 and logged["lines"] > 0 and 'id="kafka-logs"' in page
