"""Benchmark: a suite run whole and in N shards on this machine, the shards merged, and the two nights compared.

    python bench/suite_shards.py [--suite suites/quick.yaml] [--shards 2] [--seed 7] [--keep DIR]

Runs `kchaos suite FILE --seed SEED` into one store, then `kchaos suite FILE --shard I/N --seed SEED` for each I
into a store of its own (one after the other: this machine runs one Kafka cluster at a time), then
`kchaos merge` of the N shard stores into a fourth. Prints the wall time of the whole suite, of each shard, of
the merge, and the time N machines would take (the slowest shard, plus the merge); then, run by run, whether the
merged night holds what the whole night holds: the same cells and repetitions in the same order, each with the
same seed, the same fault schedule and the same options, and each run's verdict in both. The verdicts and counts
are the runs' own: a real cluster's timing differs from run to run, so they may differ where the schedule does
not. Exits 1 when the structure differs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from kchaos.core.suite_files import read_progress  # noqa: E402

# test.json fields a run's time and place set, not its suite: left out of the comparison
PLACE = ("store", "history_start_unix_ms", "argv", "recovery", "page_cache")


def kchaos(*args: str) -> float:
    """Run kchaos with `args` (output to this terminal); its wall time in seconds. Exit codes 0-2 are verdicts."""
    t0 = time.monotonic()
    code = subprocess.run([sys.executable, "-m", "kchaos", *args], cwd=REPO).returncode
    if code not in (0, 1, 2):
        sys.exit(f"kchaos {' '.join(args)}: exit {code}")
    return time.monotonic() - t0


def night(store: Path) -> Path:
    [d] = [p for p in (store / "suites").glob("*/2*") if p.is_dir()]
    return d


def runs(n: Path) -> list[dict]:
    """Each repetition of a night in order: cell, rep, seed, schedule, options, verdict."""
    out = []
    for e in read_progress(n):
        run = n / e.run
        test = json.loads((run / "test.json").read_text())
        out.append({"cell": e.cell, "rep": e.rep, "seed": e.seed, "verdict": e.verdict,
                    "schedule": json.loads((run / "schedule.json").read_text()),
                    "options": {k: v for k, v in test.items() if k not in PLACE}})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="suites/quick.yaml")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", default=None, metavar="DIR", help="keep the stores in DIR (default: a temporary one)")
    a = ap.parse_args()
    root = Path(a.keep or tempfile.mkdtemp(prefix="kchaos-shards-"))
    common = ["--seed", str(a.seed), "--quiet"]
    whole_s = kchaos("suite", a.suite, "--store", str(root / "whole"), *common)
    shard_s = [kchaos("suite", a.suite, "--shard", f"{i}/{a.shards}", "--store", str(root / f"shard{i}"), *common)
               for i in range(1, a.shards + 1)]
    merge_s = kchaos("merge", *(str(root / f"shard{i}") for i in range(1, a.shards + 1)),
                     "--store", str(root / "merged"), "--quiet")
    print(f"\nsuite {a.suite}, seed {a.seed}, {a.shards} shards; stores in {root}")
    print(f"whole: {whole_s:.1f} s; shards: {', '.join(f'{s:.1f} s' for s in shard_s)} (sum {sum(shard_s):.1f} s); "
          f"merge: {merge_s:.1f} s; on {a.shards} machines: {max(shard_s) + merge_s:.1f} s "
          f"({(max(shard_s) + merge_s) / whole_s:.2f} of the whole)")
    whole, merged = runs(night(root / "whole")), runs(night(root / "merged"))
    same = [(w["cell"], w["rep"], w["seed"], w["schedule"], w["options"])
            == (m["cell"], m["rep"], m["seed"], m["schedule"], m["options"]) for w, m in zip(whole, merged)]
    for w, m, s in zip(whole, merged, same):
        print(f"  {w['cell']} rep {w['rep'] + 1}: seed {w['seed']}, {len(w['schedule'])} scheduled faults, "
              f"{'same' if s else 'DIFFERENT'} cell, seed, schedule and options; verdict whole {w['verdict']}, "
              f"merged {m['verdict']}")
    ok = len(whole) == len(merged) and all(same)
    print(f"merged night {'holds' if ok else 'does NOT hold'} the whole night's {len(whole)} runs, in order")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
