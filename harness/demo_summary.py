"""Prints the verdicts of the newest run of every `demo-*` test side by side (used by `make demo`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def newest_runs(store: Path, names: list[str] | None = None, prefix: str = "demo-") -> list[Path]:
    """The newest run directory of each named test (default: each whose name starts with `prefix`)."""
    runs = []
    tests = [store / n for n in names if (store / n).is_dir()] if names else sorted(store.glob(f"{prefix}*"))
    for test in tests:
        dirs = sorted(d for d in test.iterdir() if d.is_dir())
        if dirs:
            runs.append(dirs[-1])
    return runs


def row(run: Path) -> str:
    """One line: test, acks, min.insync, nemeses, acked, lost, verdict."""
    test = json.loads((run / "test.json").read_text())
    res_path = run / "results.json"
    res = json.loads(res_path.read_text()) if res_path.exists() else {"valid": "no result", "counts": {}}
    c = res.get("counts", {})
    return (f"{test['name']:<24} acks={test['producer']['acks']:<4} min.insync={test['topic']['min_insync']}  "
            f"{','.join(test['nemesis']['names']):<28} acked={c.get('acked', '-'):<7} lost={c.get('lost', '-'):<5} unseen={c.get('unseen', '-'):<4} "
            f"valid={res.get('valid')}")


def main(store: str = "results", *names: str) -> int:
    """Print the table of the named tests (default: every demo-*); 0 if at least one has a run."""
    runs = newest_runs(Path(store), list(names))
    print("\n== kchaos demo: verdicts")
    for r in runs:
        print(row(r))
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
