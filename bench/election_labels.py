"""Elections per run, and the runs whose controllers labelled a clean election unclean, per variant and Kafka release.

    python bench/election_labels.py DIR...

Every run directory below each DIR (scenario stores included) is read: its results.json's `agreement.elections`
when it holds one, else the same section computed from the run's metadata log and node logs
(`kchaos.evidence.elections`, decoding with the run's Kafka jars). Prints one line per run, then a table per
(scenario variant or workload, Kafka release): runs, runs with a mislabelled election, elections by kind.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from kchaos.checkers import find_runs
from kchaos.clusters.distribution import run_libs
from kchaos.evidence.decode import decode_metadata
from kchaos.evidence.elections import KINDS, elections_section
from kchaos.evidence.explain.facts import node_names


def section(run: Path) -> dict[str, Any] | None:
    """The run's `agreement.elections`, read or computed; None without a decodable metadata log."""
    try:
        found = json.loads((run / "results.json").read_text(encoding="utf-8")).get("agreement", {}).get("elections")
    except (OSError, ValueError, AttributeError):
        found = None
    if found is not None:
        return found
    meta, _ = decode_metadata(run, run_libs)
    return None if meta is None else elections_section(meta, run / "nodes", node_names(run))


def label(run: Path) -> tuple[str, str]:
    """(variant or workload, Kafka release) of a run directory."""
    test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    version = (test.get("cluster") or {}).get("kafka_version") or "?"
    parts = run.parts
    variant = parts[parts.index("scenarios") + 1] + "/" + parts[-2] if "scenarios" in parts else \
        (test.get("workload") or {}).get("name") or "run"
    return variant, str(version)


def main(argv: list[str] | None = None) -> int:
    """Print the per-run lines and the table; exit 0."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    args = ap.parse_args(argv)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for root in args.dirs:
        for run in find_runs(root):
            s = section(run)
            if s is None:
                print(f"{run}: no metadata log", file=sys.stderr)
                continue
            key = label(run)
            rows[key].append(s)
            kinds = ", ".join(f"{k} {n}" for k, n in s["kinds"].items() if n) or "none"
            print(f"{run}  {key[1]}  elections: {kinds}; labelled unclean {s['labelled_unclean']}, "
                  f"mislabelled {s['mislabelled']}")
    print()
    print("| variant | Kafka | runs | runs with a mislabelled election | mislabelled | elections by kind |")
    print("|---|---|---:|---:|---:|---|")
    for (variant, version), ss in sorted(rows.items()):
        kinds: Counter[str] = Counter()
        for s in ss:
            kinds.update({k: int(s["kinds"].get(k) or 0) for k in KINDS})
        print(f"| {variant} | {version} | {len(ss)} | {sum(s['mislabelled'] > 0 for s in ss)} | "
              f"{sum(s['mislabelled'] for s in ss)} | {', '.join(f'{k} {n}' for k, n in kinds.items() if n)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
