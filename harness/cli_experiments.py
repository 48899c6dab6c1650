"""The experiment subcommands: `kchaos scenario`, `kchaos repro` and `kchaos shrink`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from harness.config import ConfigError
from harness.exit_codes import EXIT_INTERRUPTED
from harness.options import D, spark_options


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add the scenario, repro and shrink subcommands to `sub`."""
    sc = sub.add_parser("scenario", help="run a known data-loss scenario and say whether its prediction held")
    sc.add_argument("name", nargs="?", help="scenario name (see --list) or a scenario .yaml file")
    sc.add_argument("--list", action="store_true", help="list the scenarios with their predictions")
    sc.add_argument("--repeat", type=int, default=None, help="repetitions of each variant (default: the file's)")
    sc.add_argument("--variant", default=None, metavar="NAME[,NAME]", help="run only these variants")
    sc.add_argument("--seed", type=int, default=None, help="scenario seed (default: the file's)")
    sc.add_argument("--resume", action="store_true", help="continue the newest interrupted run of this scenario")
    sc.add_argument("--store", default=D.store, help="results root (runs go in STORE/scenarios/NAME/)")
    sc.add_argument("--hosts", default=None, metavar="FILE", help="run every variant on the machines of this "
                                                                 "hosts file over SSH (docs/hosts.md)")
    spark_options(sc)
    rp = sub.add_parser("repro", help="re-run a recorded run with its configuration, seed and fault schedule; "
                                      "say whether its anomalies reappear")
    rp.add_argument("run", help="a run directory (test.json, schedule.json, results.json)")
    rp.add_argument("--attempts", type=int, default=1, help="how many times to re-run it (default 1)")
    rp.add_argument("--store", default=D.store, help="results root (attempts go in STORE/repro/NAME/)")
    spark_options(rp)
    sh = sub.add_parser("shrink", help="search for a smaller fault schedule that still reproduces a run's anomaly")
    sh.add_argument("run", help="a run directory whose results.json shows an anomaly")
    sh.add_argument("--anomaly", default=None, help="the anomaly kind to keep (default: the run's most severe)")
    sh.add_argument("--max-runs", type=int, default=20, help="most candidate runs to try (default 20)")
    sh.add_argument("--attempts", type=int, default=1,
                    help="runs per candidate; a candidate reproduces if any of them does (default 1)")
    sh.add_argument("--store", default=D.store, help="results root (the search goes in STORE/shrink/NAME/)")
    spark_options(sh)


def _positive(value: int, flag: str, top: int) -> None:
    if not 1 <= value <= top:
        raise ConfigError(f"{flag} must be 1..{top}, got {value}")


def run(args: argparse.Namespace, console: Console, argv: list[str] | None) -> int:
    """Run one experiment subcommand; bad input raises ConfigError (exit 3) before anything is created."""
    command = ["kchaos", *(argv if argv is not None else sys.argv[1:])]
    if args.cmd == "scenario":
        return _scenario(args, console, command)
    if args.cmd == "repro":
        from harness.repro import repro, repro_table
        _positive(args.attempts, "--attempts", 100)
        try:
            rdir, report = repro(Path(args.run), Path(args.store), attempts=args.attempts,
                                 spark_master=args.spark_master, console=console, argv=command)
        except KeyboardInterrupt:
            print("kchaos: repro interrupted; the attempts so far are in the store", file=sys.stderr)
            return EXIT_INTERRUPTED
        console.print(repro_table(report))
        return 0 if report["reproduced"] == report["attempts"] else 1
    from harness.shrink import shrink
    _positive(args.max_runs, "--max-runs", 1000)
    _positive(args.attempts, "--attempts", 20)
    try:
        out = shrink(Path(args.run), Path(args.store), anomaly=args.anomaly, max_runs=args.max_runs,
                     attempts=args.attempts, spark_master=args.spark_master, console=console, argv=command)
    except KeyboardInterrupt:
        print("kchaos: shrink interrupted; shrink.jsonl holds every candidate tried so far", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if out["smallest"]["shrunk"] else 1


def _scenario(args: argparse.Namespace, console: Console, command: list[str]) -> int:
    from harness.scenario import find_scenario, load_scenario, scenario_names
    from harness.scenario_run import run_scenario, scenario_table
    if args.list:
        for name in scenario_names():
            sc = load_scenario(find_scenario(name))
            console.print(f"[bold]{sc.name}[/]: {sc.description}", highlight=False)
            for v in sc.variants:
                console.print(f"    {v.name:<28} predicts {v.predict.text}", highlight=False)
        return 0
    if not args.name:
        raise ConfigError("scenario: give a scenario name (kchaos scenario --list shows them)")
    if args.resume and args.seed is not None:
        raise ConfigError("--resume continues with the scenario's own seed; drop --seed")
    if args.repeat is not None:
        _positive(args.repeat, "--repeat", 100)
    sc = load_scenario(find_scenario(args.name))
    only = tuple(x for x in (args.variant or "").split(",") if x)
    unknown = [x for x in only if x not in {v.name for v in sc.variants}]
    if unknown:
        raise ConfigError(f"--variant {','.join(unknown)}: scenario {sc.name} has "
                          f"{', '.join(v.name for v in sc.variants)}")
    try:
        sdir, results = run_scenario(sc, Path(args.store), repeat=args.repeat, only=only, seed=args.seed,
                                     resume=args.resume, spark_master=args.spark_master, console=console,
                                     hosts=args.hosts,
                                     argv=command)
    except KeyboardInterrupt:
        print(f"kchaos: scenario interrupted; continue it with: kchaos scenario {args.name} --resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    console.print(scenario_table(sc, sdir, results))
    return 0 if results and all(r.agreed for r in results) else 1
