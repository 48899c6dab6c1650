"""Prints the verdicts of the newest run of every `demo-*` test side by side (used by `make demo`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def newest_runs(store: Path, prefix: str = "demo-") -> list[Path]:
    """The newest run directory of each test whose name starts with `prefix`."""
    runs = []
    for test in sorted(store.glob(f"{prefix}*")):
        dirs = sorted(d for d in test.iterdir() if d.is_dir())
        if dirs:
            runs.append(dirs[-1])
    return runs


def row(run: Path) -> str:
    """One line: test, acks, min.insync, acked, lost, verdict."""
    test = json.loads((run / "test.json").read_text())
    res_path = run / "results.json"
    res = json.loads(res_path.read_text()) if res_path.exists() else {"valid": "no result", "counts": {}}
    c = res.get("counts", {})
    return (f"{test['name']:<16} acks={test['producer']['acks']:<4} min.insync={test['topic']['min_insync']}  "
            f"acked={c.get('acked', '-'):<7} lost={c.get('lost', '-'):<5} unseen={c.get('unseen', '-'):<4} "
            f"valid={res.get('valid')}")


def main(store: str = "results") -> int:
    """Print the table; 0 if at least one demo run has a result."""
    runs = newest_runs(Path(store))
    print("\n== kchaos demo: verdicts")
    for r in runs:
        print(row(r))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
