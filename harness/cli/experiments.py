"""The experiment subcommands: `kchaos scenario`, `kchaos repro` and `kchaos shrink`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from kchaos.core.config import ConfigError
from kchaos.core.exit_codes import EXIT_INTERRUPTED
from kchaos.harness.options import D, spark_options

if TYPE_CHECKING:
    from kchaos.harness.scenarios.scenario import Scenario


ABOUT = {
    "scenario": ("run a known data-loss scenario and say whether its runs match its prediction",
                 "Run every variant of a scenario (scenarios/NAME.yaml, or a scenario file: a configuration, an "
                 "exact fault schedule and a prediction, docs/scenarios.md) and judge each run's observed metrics "
                 "against the prediction. The runs go in STORE/scenarios/NAME/<UTC stamp>/ with scenario.json and "
                 "a JUnit report.xml. Each run's verdict (pass, fail, unknown) is shown beside whether it matches the "
                 "prediction. The exit code is 0 when every prediction matched. --list shows the scenarios; "
                 "--dry-run checks the file and prints the variants it would run."),
    "repro": ("re-run a recorded run exactly; say whether its anomalies reappear",
              "Re-run a recorded run with its configuration, seed and fault schedule, as many times as --attempts "
              "says, and say whether the anomalies it showed reappear. The attempts go in STORE/repro/NAME/ with "
              "repro.json. The exit code is 0 when every attempt reproduced them."),
    "shrink": ("search for a smaller fault schedule that still shows a run's anomaly",
               "Search for a smaller fault schedule (fewer faults, fewer nodes, shorter faults, a shorter run) that "
               "still reproduces a run's anomaly, and save it with the runs that prove it in STORE/shrink/NAME/. "
               "The exit code is 0 when a smaller schedule was found."),
}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add the scenario, repro and shrink subcommands to `sub`."""
    def command(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=ABOUT[name][0], description=ABOUT[name][1])

    sc = command("scenario")
    sc.add_argument("name", nargs="?", help="scenario name (see --list) or a scenario .yaml file")
    sc.add_argument("--list", action="store_true", help="list the scenarios with their predictions")
    sc.add_argument("--dry-run", action="store_true", help="check the scenario and print the variants it would "
                    "run, with their seeds; start nothing, create no run")
    sc.add_argument("--repeat", type=int, default=None, help="repetitions of each variant (default: the file's)")
    sc.add_argument("--variant", default=None, metavar="NAME[,NAME]", help="run only these variants (default: all); "
                    "NAME-kafka-LINE is the variant on that Kafka line")
    sc.add_argument("--versions", default=None, metavar="LINE[,LINE]|listed",
                    help="run each variant on each of these Kafka lines (3.7 ... 4.4, or releases); `listed`: the "
                    "scenario's own versions list (default: the version each variant sets, else the default)")
    sc.add_argument("--seed", type=int, default=None, help="scenario seed (default: the file's)")
    sc.add_argument("--resume", action="store_true", help="continue the newest interrupted run of this scenario")
    sc.add_argument("--store", default=D.store, help="results root (runs go in STORE/scenarios/NAME/)")
    sc.add_argument("--hosts", default=None, metavar="FILE", help="run every variant on the machines of this "
                    "hosts file over SSH, docs/hosts.md (default: Docker containers on this machine)")
    spark_options(sc)
    rp = command("repro")
    rp.add_argument("run", help="a run directory (test.json, schedule.json, results.json)")
    rp.add_argument("--attempts", type=int, default=1, help="how many times to re-run it")
    rp.add_argument("--store", default=D.store, help="results root (attempts go in STORE/repro/NAME/)")
    spark_options(rp)
    sh = command("shrink")
    sh.add_argument("run", help="a run directory whose results.json shows an anomaly")
    sh.add_argument("--anomaly", default=None, help="the anomaly kind to keep (default: the run's most severe)")
    sh.add_argument("--max-runs", type=int, default=20, help="most candidate runs to try")
    sh.add_argument("--attempts", type=int, default=1,
                    help="runs per candidate; a candidate reproduces if any of them does")
    sh.add_argument("--store", default=D.store, help="results root (the search goes in STORE/shrink/NAME/)")
    spark_options(sh)


def _positive(value: int, flag: str, top: int) -> None:
    if not 1 <= value <= top:
        raise ConfigError(f"{flag} must be 1..{top}, got {value}")


def run(args: argparse.Namespace, console: Console, out: Console, argv: list[str] | None) -> int:
    """Run one experiment subcommand, its steps on `console` and its verdict on `out`; bad input raises
    ConfigError (exit 3) before anything is created."""
    command = ["kchaos", *(argv if argv is not None else sys.argv[1:])]
    if args.cmd == "scenario":
        return _scenario(args, console, out, command)
    if args.cmd == "repro":
        from kchaos.harness.cli.console import print_repro
        from kchaos.harness.scenarios.repro import repro
        _positive(args.attempts, "--attempts", 100)
        try:
            rdir, report = repro(Path(args.run), Path(args.store), attempts=args.attempts,
                                 spark_master=args.spark_master, console=console, argv=command)
        except KeyboardInterrupt:
            print("kchaos: repro interrupted; the attempts so far are in the store", file=sys.stderr)
            return EXIT_INTERRUPTED
        print_repro(out, report)
        return 0 if report["reproduced"] == report["attempts"] else 1
    from kchaos.harness.cli.console import print_shrunk
    from kchaos.harness.scenarios.shrink import shrink
    _positive(args.max_runs, "--max-runs", 1000)
    _positive(args.attempts, "--attempts", 20)
    try:
        result = shrink(Path(args.run), Path(args.store), anomaly=args.anomaly, max_runs=args.max_runs,
                        attempts=args.attempts, spark_master=args.spark_master, console=console, argv=command)
    except KeyboardInterrupt:
        print("kchaos: shrink interrupted; shrink.jsonl holds every candidate tried so far", file=sys.stderr)
        return EXIT_INTERRUPTED
    print_shrunk(out, result)
    return 0 if result["smallest"]["shrunk"] else 1


def _scenario(args: argparse.Namespace, console: Console, out: Console, command: list[str]) -> int:
    from kchaos.harness.cli.console import print_scenario, print_scenarios
    from kchaos.harness.scenarios.run import run_scenario
    from kchaos.harness.scenarios.scenario import find_scenario, load_scenario, scenario_names
    if args.list:
        print_scenarios(out, [load_scenario(find_scenario(name)) for name in scenario_names()])
        return 0
    if not args.name:
        raise ConfigError("scenario: give a scenario name (kchaos scenario --list shows them)")
    if args.resume and args.dry_run:
        raise ConfigError("--dry-run shows a fresh run of the scenario; drop --resume")
    if args.resume and args.seed is not None:
        raise ConfigError("--resume continues with the scenario's own seed; drop --seed")
    if args.repeat is not None:
        _positive(args.repeat, "--repeat", 100)
    sc, only = load_scenario(find_scenario(args.name)).select(
        tuple(x for x in (args.variant or "").split(",") if x), tuple(x for x in (args.versions or "").split(",") if x))
    if args.dry_run:
        return _dry_run(sc, args, only, out)
    try:
        sdir, results = run_scenario(sc, Path(args.store), repeat=args.repeat, only=only, seed=args.seed,
                                     resume=args.resume, spark_master=args.spark_master, console=console,
                                     hosts=args.hosts, argv=command)
    except KeyboardInterrupt:
        print(f"kchaos: scenario interrupted; continue it with: kchaos scenario {args.name} --resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    print_scenario(out, sc, sdir, results)
    return 0 if results and all(r.agreed for r in results) else 1


def _dry_run(sc: Scenario, args: argparse.Namespace, only: tuple[str, ...], out: Console) -> int:
    """Print the variants the scenario would run; the file, the store and a hosts file are checked, nothing made."""
    from kchaos.core.store import check_store
    from kchaos.harness.cli.console import print_lines, scenario_plan

    suite = sc.suite(args.repeat, only).on_hosts(args.hosts)
    store = check_store(args.store)
    print_lines(out, scenario_plan(sc, suite, sc.seed if args.seed is None else args.seed,
                                   store / "scenarios" / sc.name / "<UTC stamp>"))
    return 0
