"""Campaign: run every scenario variant until the ledger holds N repetitions of its current configuration.

    python bench/scenario_campaign.py [--target 10] [--scenarios NAME,...] [--variants V,...] [--versions]
                                      [--lock FILE] [--store DIR] [--dry-run]

One repetition is one `kchaos scenario NAME --variant V --seed S` (S = 7000 + the repetitions the ledger
holds of V in any configuration, so no seed repeats when a prediction changes and the options do not), run
while holding an exclusive lock on FILE (default /tmp/kchaos-cluster.lock), so other work that
needs the one Docker cluster (`flock FILE pytest tests/integration`) can take turns with it.
Variants are visited round-robin, the least repeated first, so a campaign cut short leaves the
counts even. After each repetition its scenario directory is appended to the ledger
(bench/scenario_rates.py --record). A variant's "current configuration" is the config hash and the
prediction of its newest ledger line (the table's row); a variant with no line yet has none.

kchaos is run as `python -m kchaos` by the Python that runs this file, so a campaign runs the code installed in
that Python's environment (a git worktree runs its own code from its own venv). `--kchaos PATH` runs another
kchaos instead.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenario_rates import LEDGER, REPO, file_order, read_ledger

from kchaos.core.exit_codes import EXIT_BAD_INPUT


def predictions(versions: bool = False) -> dict[str, dict[str, str]]:
    """Each shipped scenario's variants, with the prediction its file makes today: each on its own line, or with
    `versions` on each line the scenario lists (`kchaos scenario NAME --versions listed`)."""
    from kchaos.core.kafka_versions import line_of
    from kchaos.harness.scenarios.scenario import find_scenario, load_scenario

    out = {}
    for name in file_order():
        sc = load_scenario(find_scenario(name))
        if versions:
            sc, _ = sc.select((), ("listed",))
        out[name] = {v.name: v.prediction_on(line_of(v.version).line).text for v in sc.variants}
    return out


def needed(target: int, only: set[str] | None = None, versions: bool = False,
           variants: set[str] | None = None) -> list[tuple[str, str, int, int]]:
    """(scenario, variant, repetitions of its current configuration, repetitions in all) for each variant short of
    `target`, fewest first; only the scenarios named in `only` and the variants named in `variants`, when given;
    with `versions`, each variant on each line its scenario lists. The current configuration is the newest
    repetition's options with the prediction the scenario file makes today: a changed prediction starts again."""
    reps = [r for r in read_ledger(LEDGER) if r.matched is not None]
    out = []
    for scenario, variants_of in predictions(versions).items():
        if only and scenario not in only:
            continue
        for v, predict in variants_of.items():
            if variants and v not in variants:
                continue
            mine = sorted((r for r in reps if (r.scenario, r.variant) == (scenario, v)), key=lambda r: r.date)
            have = sum((r.config, r.predict) == (mine[-1].config, predict) for r in mine) if mine else 0
            if have < target:
                out.append((scenario, v, have, len(mine)))
    return sorted(out, key=lambda x: x[2])


def main(argv: list[str] | None = None) -> int:
    """Run the campaign; exit 0 when every variant has `--target` repetitions."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=int, default=10)
    ap.add_argument("--lock", default="/tmp/kchaos-cluster.lock")
    ap.add_argument("--store", default=str(REPO / "results"))
    ap.add_argument("--kchaos", help="a kchaos executable (default: this checkout's, run by this Python)")
    ap.add_argument("--dry-run", action="store_true", help="print what is still needed and stop")
    ap.add_argument("--scenarios", help="only these scenarios, comma-separated (default: every one)")
    ap.add_argument("--variants", help="only these variants of those scenarios, comma-separated, e.g. "
                    "kafka-4.0-elr,config-only-kafka-3.9 (default: every one)")
    ap.add_argument("--versions", action="store_true", help="each variant on each Kafka line its scenario's "
                    "`versions` lists (NAME-kafka-LINE off its own line); default: each variant on its own")
    a = ap.parse_args(argv)
    store = str(Path(a.store).resolve())
    kchaos = [a.kchaos] if a.kchaos else [sys.executable, "-m", "kchaos"]
    env = dict(os.environ)
    only = set(a.scenarios.split(",")) if a.scenarios else None
    variants = set(a.variants.split(",")) if a.variants else None
    known = {s: vs for s, vs in predictions(a.versions).items() if not only or s in only}
    names = {v for vs in known.values() for v in vs}
    for kind, asked, have in (("scenario", only, set(known)), ("variant", variants, names)):
        if unknown := sorted((asked or set()) - have):  # a typo would otherwise run nothing and exit 0
            print(f"scenario_campaign: error: no such {kind}: {', '.join(unknown)}", file=sys.stderr)
            return EXIT_BAD_INPUT
    while todo := needed(a.target, only, a.versions, variants):
        if a.dry_run:
            for scenario, v, have, _ in todo:
                print(f"{scenario} {v}: {have}/{a.target}")
            return 0
        scenario, v, _, held = todo[0]
        args = ["scenario", scenario, "--variant", v, "--seed", str(7000 + held), "--store", store]
        with open(a.lock, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            print(f"{time.strftime('%H:%M:%S')} {' '.join(args)}", flush=True)
            # The repetition holds the lock too (the same open file): a campaign killed mid-repetition leaves the
            # cluster locked until that repetition ends, so nothing else starts a cluster beside it.
            subprocess.run([*kchaos, *args], check=False, env=env, cwd=REPO, pass_fds=(lock.fileno(),))
        runs = [p for p in (Path(store) / "scenarios" / scenario).iterdir() if p.is_dir() and not p.is_symlink()]
        newest = max(runs, key=lambda p: p.name)
        subprocess.run([sys.executable, str(REPO / "bench" / "scenario_rates.py"), str(newest), "--record"],
                       check=False, stdout=subprocess.DEVNULL)
        time.sleep(5)  # let a waiting `flock` take the cluster between repetitions
    return 0


if __name__ == "__main__":
    sys.exit(main())
