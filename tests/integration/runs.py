"""One `kchaos run` through the command line, as a user types it, with its results."""
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

KCHAOS = [sys.executable, "-m", "harness.cli"]


def finished_run(store: Path, name: str, options: list[str], timeout: float = 900) -> tuple[Path, dict[str, Any]]:
    """Run `kchaos run --store STORE --name NAME OPTIONS`; assert it exited 0 (else show what failed, what was
    undecided and the end of its stderr); return the run directory and its results.json."""
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", name, *options],
                          capture_output=True, text=True, timeout=timeout)
    run = (Path(store) / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert proc.returncode == 0, (results.get("failed"), results.get("undecided"), proc.stderr[-3000:])
    return run, results


def assert_a_copier_crashed_and_was_replaced(ops: list[dict[str, Any]]) -> None:
    """crash-client crashed a copier mid-transaction, and a new copier with its transactional.id started (its
    init fencing the crashed producer)."""
    assert any(o["process"] == "nemesis" and o["f"] == "crash" and o["type"] == "ok" for o in ops), \
        "crash-client never crashed a copier"
    assert any(o["f"] == "init" and o["type"] == "ok" and o["after_crash"] for o in ops), \
        "no copier was replaced (a new producer fencing the crashed one)"
    assert any(o["f"] == "copy" and o["type"] == "fail" and "crashed" in o.get("error", "") for o in ops), \
        "no copier crashed mid-transaction"
