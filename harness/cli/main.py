"""`kchaos` command line: parse the arguments (`kchaos.harness.cli.parser`), run the command, print its verdict
on stdout and its steps on stderr, and turn every error into one line and an exit code (`kchaos.core.exit_codes`:
0 pass, 1 fail, 2 unknown (docs/verdicts.md), 3 bad input, 4 environment, 5 the cluster failed, 6 a suite
regressed (with --fail-on-regression), 130 interrupted).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from kchaos.core.config import ConfigError
from kchaos.core.exit_codes import EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_ENV, EXIT_INTERRUPTED, EXIT_REGRESSION
from kchaos.harness.cli import experiments as cli_experiments
from kchaos.harness.cli.console import (
    print_compare,
    print_explanation,
    print_lines,
    print_regressions,
    print_run,
    print_suite,
    run_headline,
    run_plan,
    runs_summary,
    suite_plan,
)
from kchaos.harness.cli.parser import build_parser, unrecognized
from kchaos.harness.options import D, config_from_args
from kchaos.harness.terminal import make_console

__all__ = ["build_parser", "main"]


def _command(argv: list[str] | None) -> list[str]:
    return ["kchaos", *(argv if argv is not None else sys.argv[1:])]


def _suite(args: argparse.Namespace, console: Console, out: Console, argv: list[str] | None) -> int:
    """`kchaos suite FILE`: run it, or a shard of it (with --dry-run only check it and print its cells); the table
    on `out`."""
    from kchaos.harness.suites.run import run_suite
    from kchaos.harness.suites.shard import WHOLE, Shard, require_seed
    from kchaos.harness.suites.suite import load_suite
    if args.resume and args.dry_run:
        raise ConfigError("--dry-run shows a fresh run of the suite; drop --resume")
    if args.resume and args.seed is not None:
        raise ConfigError("--resume continues with the suite's own seed; drop --seed")
    shard = Shard.parse(args.shard) if args.shard is not None else WHOLE
    suite = load_suite(Path(args.file)).on_hosts(args.hosts)
    if not args.resume:
        require_seed(shard, args.seed if args.seed is not None else suite.seed)
    if args.dry_run:
        from kchaos.core.store import check_store
        seed = args.seed if args.seed is not None else suite.seed
        where = check_store(args.store) / "suites" / suite.name / "<UTC stamp>"
        print_lines(out, suite_plan(suite, seed, where, shard))
        return 0
    try:
        sdir, outcomes = run_suite(suite, Path(args.store), resume=args.resume, seed=args.seed,
                                   spark_master=args.spark_master, console=console, argv=_command(argv),
                                   shard=shard)
    except KeyboardInterrupt:
        again = f" --shard {shard}" if not shard.whole else ""
        print(f"kchaos: suite interrupted; continue it with: kchaos suite {args.file}{again} --resume",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return _night_verdict(args, console, out, suite.name if shard.whole else f"{suite.name} shard {shard}", sdir,
                          outcomes)


def _merge(args: argparse.Namespace, console: Console, out: Console, argv: list[str] | None) -> int:
    """`kchaos merge SOURCE...`: the shards of a suite night joined into one night of --store; the table on `out`."""
    from kchaos.core.store import check_store
    from kchaos.harness.suites.merge import merge_shards
    suite, night, outcomes = merge_shards([Path(s) for s in args.sources], check_store(args.store),
                                          argv=_command(argv), console=console)
    return _night_verdict(args, console, out, suite.name, night, outcomes)


def _night_verdict(args: argparse.Namespace, console: Console, out: Console, name: str, sdir: Path,
                   outcomes: list[Any]) -> int:
    """A suite night's table and its regressions since the suite's previous night in --store; the exit code."""
    print_suite(out, name, sdir, outcomes)
    from kchaos.reports.suite.junit import exit_code as suite_exit_code
    from kchaos.reports.suite.regressions import night_regressions
    try:
        regressions, before = night_regressions(Path(args.store), sdir)
    except sqlite3.Error as e:  # the suite's results stand; only the comparison with other nights is missing
        console.print(f"kchaos: regressions not computed: results index unusable ({e}); "
                      f"kchaos index --rebuild --store {args.store} remakes it", markup=False)
        return suite_exit_code(outcomes)
    print_regressions(out, regressions, sdir.parent / before.split("/")[-1] if before else None)
    if regressions and args.fail_on_regression:
        return EXIT_REGRESSION
    return suite_exit_code(outcomes)


def _index(args: argparse.Namespace, out: Console) -> int:
    """`kchaos index`: bring the store's results index up to date (or rebuild it) and say what it holds."""
    from kchaos.core.store import check_store
    from kchaos.reports.suite.run_index import INDEX_FILE, RunIndex
    store = check_store(args.store)
    if not store.is_dir():
        raise ConfigError(f"--store {args.store}: no such directory")
    try:
        with RunIndex(store) as index:
            done = index.refresh(rebuild=args.rebuild)
    except sqlite3.Error as e:
        raise ConfigError(f"--store {args.store}: cannot keep its index {store / INDEX_FILE}: {e}") from None
    how = "rebuilt" if done.rebuilt else f"{done.updated} row(s) read again, {done.removed} removed"
    out.print(f"index: {done.runs} runs, {done.nights} suite nights ({how}) → {store / INDEX_FILE}",
              markup=False, highlight=False)
    return 0


def _reports(args: argparse.Namespace, console: Console, out: Console) -> int:
    """compare, report and serve; errors propagate to main's handlers."""
    if args.cmd in ("compare", "report"):
        from kchaos.checkers import HISTORY_FILE, RESULTS_FILE, check_runs, find_runs
        from kchaos.clusters.distribution import run_libs
        path = Path(args.path)
        if not path.is_dir():
            raise ConfigError(f"{path}: not a directory")
        one = (path / HISTORY_FILE).exists()
        if args.cmd == "report":
            from kchaos.reports.run.report import write_report
            runs = [path] if one else find_runs(path)
            if not runs:
                raise ConfigError(f"{path}: no runs (history.jsonl) below this directory")
            for run in runs:
                out.print(f"report: {write_report(run)}", markup=False, highlight=False)
            return 0
        if one:
            raise ConfigError(f"{path}: one run, not a suite or a directory of runs: it has nothing to compare with "
                              f"(kchaos report {path} rewrites its report)")
        from kchaos.reports.suite.compare import write_compare
        unchecked = [r for r in find_runs(path) if not (r / RESULTS_FILE).exists()]
        if unchecked:
            console.print(f"checking {len(unchecked)} run(s) that have no results.json yet")
            check_runs(path, unchecked, args.spark_master, find_libs=run_libs)
        print_compare(out, path, write_compare(path))
        return 0
    return _serve(args, console)


def _serve(args: argparse.Namespace, console: Console) -> int:
    """`kchaos serve`: the store's pages; with --warm-check, also `kchaos check` of its runs on this process's
    Spark, started at once so that the first check finds it warm."""
    from kchaos.reports.serve.server import make_server, serve
    if not args.warm_check:
        serve(Path(args.store), args.host, args.port, say=console.print)
        return 0
    # A bad store or address is one line before the socket and the Spark session are made.
    make_server(Path(args.store), args.host, args.port).server_close()
    from kchaos.checkers import CheckInputError
    from kchaos.checkers.spark import prestart
    from kchaos.core.history import HistoryError
    from kchaos.harness.warm_check import CheckService
    service = CheckService(Path(args.store), lambda run, say, report: _check_one(run, args.spark_master, say, report),
                           (ConfigError, CheckInputError, HistoryError))
    try:
        service.start()
    except OSError as e:
        raise ConfigError(f"--warm-check: {e}") from None
    try:
        prestart(args.spark_master)
        console.print(f"warm check: `kchaos check RUN` of a run below {args.store} runs on this process's Spark")
        serve(Path(args.store), args.host, args.port, say=console.print)
    finally:
        service.close()
    return 0


# What `check --json` leaves out of results.json unless --full: the per-second timeline and each checker's own
# details, which grow with the run (megabytes for a long one).
JSON_DETAILS = ("timeline", "checkers")


def json_summary(results: dict[str, Any]) -> dict[str, Any]:
    """A run's results without JSON_DETAILS: the verdict, counts, reasons, loss, stats and latencies."""
    return {k: v for k, v in results.items() if k not in JSON_DETAILS}


def _check(args: argparse.Namespace, console: Console, out: Console) -> int:
    """`kchaos check PATH`: the verdict and counts (or the JSON results) on `out`; the exit code is the verdict. A
    run below a store that a `kchaos serve --warm-check` holds is checked there, on its warm Spark (unless
    --spark-master names another Spark); anything else here."""
    if args.full and not args.json:
        raise ConfigError("--full only applies to --json")
    from kchaos.checkers import HISTORY_FILE, check_tree, exit_code
    path = Path(args.path)
    many = path.is_dir() and not (path / HISTORY_FILE).exists()
    answered = None
    if path.is_dir() and not many and args.spark_master == D.spark_master:
        from kchaos.harness.warm_check import CheckRefused, ask
        try:
            answered = ask(path)
        except CheckRefused as e:
            raise ConfigError(str(e)) from None
    if answered is not None:
        results, said, store = answered
        for line in said:
            console.print(line, markup=False, highlight=False)
        console.print(f"checked by kchaos serve --warm-check of {store}")
    elif many:
        from kchaos.clusters.distribution import run_libs
        results = check_tree(path, args.spark_master, find_libs=run_libs)
    else:
        results = _check_one(path, args.spark_master, console.print)
    if args.json:
        print(json.dumps(results if args.full or many else json_summary(results), indent=2))
    elif many:
        out.print(runs_summary(results), markup=False, highlight=False)
    else:
        print_run(out, results)
    return exit_code(results.get("verdict") or results["valid"])


def _check_one(path: Path, spark_master: str, say: Any, report: bool = True) -> dict[str, Any]:
    """Check one run directory or history file on this process's Spark, and rewrite a run's report.html (when
    `report`); its results."""
    from kchaos.checkers import check_path
    from kchaos.clusters.distribution import run_libs
    results = check_path(path, spark_master, find_libs=run_libs)
    if report and path.is_dir() and (path / "test.json").exists():
        from kchaos.harness.runner import write_report_safely
        write_report_safely(path, say)
    return results


def _explain(run: Path, console: Console, all_ranges: bool = False) -> int:
    """`kchaos explain RUN`: explain the run's anomalies from Kafka's files by its workload's explainer, rebuild
    report.html, and print the explanation: for lost writes, one sentence per group of lost ranges with one cause
    (with `all_ranges`, one per range); for a txn run, each anomalous transaction's
    facts and cause."""
    from kchaos.checkers import CheckInputError, workload_of_run
    from kchaos.clusters.distribution import run_libs
    from kchaos.harness.runner import write_report_safely
    if not run.is_dir() or not (run / "history.jsonl").is_file():
        raise ConfigError(f"{run}: not a run directory")
    try:
        test = json.loads((run / "test.json").read_text(encoding="utf-8")) if (run / "test.json").is_file() else {}
        explainer = workload_of_run(test if isinstance(test, dict) else {}, run / "history.jsonl").explainer
    except (OSError, ValueError, CheckInputError) as e:
        raise ConfigError(f"{run}: {e}") from None
    if explainer is None:
        console.print("nothing to explain: this workload's anomalies are not read off Kafka's files")
        return 0
    print_explanation(console, explainer, explainer.explain(run, run_libs), all_ranges)
    write_report_safely(run, console.print)
    return 0


def _describe_faults(path: Path) -> list[Path]:
    """Write faults.json beside each history that `kchaos check`, `compare`, `report` or `explain` will read at
    `path` (a history file, a run directory, or a directory with runs below it) and that has none: one entry for
    each nemesis spec its nemesis lines name, as the nemesis registry describes it now. A spec the registry does
    not know is left out, so none of its ops counts as a fault. A history that cannot be scanned gets nothing:
    the command itself says what is wrong with it. Returns the files written."""
    from kchaos import nemesis
    from kchaos.checkers import HISTORY_FILE, CheckInputError, find_runs
    from kchaos.checkers.history_scan import scan
    from kchaos.core.faults import FAULTS_FILE, write_faults
    if path.is_file():
        histories = [path]
    elif path.is_dir():
        histories = [path / HISTORY_FILE] if (path / HISTORY_FILE).is_file() else \
            [run / HISTORY_FILE for run in find_runs(path)]
    else:
        return []
    written = []
    for history in histories:
        if (history.parent / FAULTS_FILE).exists():
            continue
        try:
            ops = scan(history).nemesis
        except CheckInputError:
            continue
        kinds = []
        for spec in dict.fromkeys(op["nemesis"] for op in ops if isinstance(op.get("nemesis"), str)):
            try:
                kinds.append(nemesis.fault_kind(spec))
            except ValueError:
                continue
        written.append(write_faults(history.parent, kinds))
    return written


def _versions(out: Console) -> int:
    """Print `kchaos versions`: each line kchaos runs, its latest patch, and what of it is cached."""
    from kchaos.clusters.distribution import cached_versions
    from kchaos.core.kafka_versions import DEFAULT, LINES

    cached = cached_versions()
    for x in LINES:
        others = [v for v in x.patches if v in cached and v != x.latest]
        state = "cached" if x.latest in cached else "not cached"
        extra = f" (also cached: {', '.join(others)})" if others else ""
        default = " [default]" if DEFAULT in x.patches else ""
        out.print(f"{x.line}  {x.latest}  {state}{extra}{default}", markup=False, highlight=False)
    return 0


def _sigterm(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt


def _parse(argv: list[str] | None) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code when parsing ended the command (--help, --version: 0; bad: 3)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            parser.error(unrecognized(parser, args.cmd, extra))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT if e.code else 0
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kchaos` console script; returns the exit code."""
    args = _parse(argv)
    if isinstance(args, int):
        return args
    console = make_console(sys.stderr, color=args.color, quiet=args.quiet)
    out = make_console(sys.stdout, color=args.color)
    if getattr(args, "spark_driver_host", None):
        from kchaos.checkers.spark import DRIVER_HOST_ENV
        os.environ[DRIVER_HOST_ENV] = args.spark_driver_host
    signal.signal(signal.SIGTERM, _sigterm)
    # Imported late: `kchaos cleanup` and bad options must not wait for Spark or Docker imports.
    from kchaos.checkers import CheckInputError, exit_code
    from kchaos.clusters.cluster import ClusterError, HostCheckError
    from kchaos.clusters.distribution import DistributionError
    from kchaos.clusters.engine import EngineError
    from kchaos.clusters.image import ImageError
    from kchaos.clusters.kafka_node import NodeError
    from kchaos.clusters.remote import ConnectError, RemoteError
    from kchaos.core.history import HistoryError
    from kchaos.core.store import StoreError
    from kchaos.evidence import EvidenceError
    from kchaos.reports import ReportsInputError
    written: list[Path] = []
    try:
        if args.cmd == "cleanup" and args.hosts:
            from kchaos.clusters.ssh import cleanup_hosts
            from kchaos.core.hosts import load_hosts
            cleanup_hosts(load_hosts(args.hosts), lambda m: out.print(m, markup=False, highlight=False))
            return 0
        if args.cmd == "cleanup":
            from kchaos.clusters.docker import cleanup
            removed = cleanup()
            out.print(f"removed {len(removed['containers'])} containers, {len(removed['networks'])} networks")
            return 0
        if args.cmd == "versions":
            return _versions(out)
        if args.cmd == "prepare" and args.checker_only and args.upgrade_to:
            raise ConfigError("--upgrade-to prepares Kafka's nodes, which --checker-only leaves alone")
        if args.cmd == "prepare" and args.checker_only:
            from kchaos.harness.runner import prepare_checker
            prepare_checker(console)
            return 0
        if args.cmd == "prepare":
            from kchaos.harness.runner import prepare
            image = prepare(args.kafka_version, args.kafka_dist, args.base_image, console, checker=not args.no_checker,
                            upgrade_to=args.upgrade_to)
            out.print(f"node image: {image}", markup=False, highlight=False)
            return 0
        if args.cmd in ("check", "compare", "report", "explain"):
            written = _describe_faults(Path(args.run if args.cmd == "explain" else args.path))
        if args.cmd == "check":
            return _check(args, console, out)
        if args.cmd == "suite":
            return _suite(args, console, out, argv)
        if args.cmd == "merge":
            return _merge(args, console, out, argv)
        if args.cmd == "index":
            return _index(args, out)
        if args.cmd in ("compare", "report", "serve"):
            return _reports(args, console, out)
        if args.cmd == "explain":
            return _explain(Path(args.run), console, args.all)
        if args.cmd in ("scenario", "repro", "shrink"):
            return cli_experiments.run(args, console, out, argv)
        from kchaos.harness.build import preflight
        from kchaos.harness.runner import run_test
        cfg = preflight(config_from_args(args))
        if args.dry_run:
            from kchaos.core.store import check_store
            print_lines(out, run_plan(cfg, check_store(cfg.store) / cfg.name / "<UTC stamp>"))
            return 0
        run, results = run_test(cfg, argv=_command(argv), console=console, keep=args.keep)
        out.print(run_headline(cfg, run), markup=False, highlight=False)
        print_run(out, results)
        return exit_code(results.get("verdict") or results["valid"])
    except (ConfigError, StoreError, CheckInputError, HistoryError, ReportsInputError, EvidenceError) as e:
        for path in written:  # bad input leaves nothing behind
            path.unlink(missing_ok=True)
        print(f"kchaos: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (EngineError, DistributionError, ImageError, ConnectError, HostCheckError) as e:
        print(f"kchaos: error: {e}", file=sys.stderr)
        return EXIT_ENV
    except (ClusterError, RemoteError, NodeError) as e:
        print(f"kchaos: cluster error: {e}", file=sys.stderr)
        return EXIT_CLUSTER
    except KeyboardInterrupt:
        print("kchaos: interrupted; the history so far is in the run directory", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
