"""`kchaos` command line: run, check, cleanup.

Exit codes: 0 valid, 1 invalid, 2 unknown, 3 bad input (options, paths,
histories), 4 environment (no Docker Engine, no Kafka jars, image build),
5 the cluster failed, 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

from rich.console import Console

from harness import cli_experiments
from harness.config import ConfigError
from harness.exit_codes import EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_ENV, EXIT_INTERRUPTED
from harness.options import D, add_run_options, config_from_args, spark_options


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own exit code 2 would read as "unknown"
        print(f"kchaos: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    p = _Parser(prog="kchaos", description="Jepsen-style chaos testing for Apache Kafka.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="run one test against a fresh cluster")
    add_run_options(r)
    c = sub.add_parser("check", help="check a run directory, a history.jsonl, or every run below a directory "
                                     "(one Spark job; writes checks.json and checks.csv there)")
    c.add_argument("path")
    c.add_argument("--json", action="store_true", help="print the results object on stdout")
    spark_options(c)
    s = sub.add_parser("suite", help="run every cell of a suite file (a matrix of run options), with a "
                                     "comparison, JUnit report.xml and a summary at the end")
    s.add_argument("file", help="suite YAML file (see suites/ and docs/suites.md)")
    s.add_argument("--resume", action="store_true", help="continue the newest interrupted run of this suite")
    s.add_argument("--seed", type=int, default=None, help="suite seed (default: the file's, else random)")
    s.add_argument("--store", default=D.store, help="results root (the suite goes in STORE/suites/NAME/)")
    s.add_argument("--hosts", default=None, metavar="FILE", help="run every cell on the machines of this hosts "
                                                                "file over SSH (docs/hosts.md)")
    spark_options(s)
    cmp_ = sub.add_parser("compare", help="compare every run below a directory: compare.csv and compare.html, "
                                          "one row per configuration")
    cmp_.add_argument("path")
    cmp_.add_argument("--spark-master", default=D.spark_master, help="for checking runs not yet checked")
    rep = sub.add_parser("report", help="(re)write report.html for a run directory, or for every run below a directory")
    rep.add_argument("path")
    sv = sub.add_parser("serve", help="browse a results store on a local web page")
    sv.add_argument("--store", default=D.store, help="results root to serve")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8000)
    cli_experiments.add_parsers(sub)
    ex = sub.add_parser("explain", help="(re)build a run's explanation of its lost writes from the Kafka files it "
                                        "collected (RUN/evidence/raw) and print why each lost range was lost")
    ex.add_argument("run", help="a run directory")
    cl = sub.add_parser("cleanup", help="remove every container and network kchaos made (with --hosts: "
                                        "everything it made on those hosts)")
    cl.add_argument("--hosts", default=None, metavar="FILE",
                    help="a hosts file: undo kchaos's faults, processes and mounts on those hosts and remove "
                         "its directory there, instead of the Docker cleanup")
    pr = sub.add_parser("prepare", help="fetch the Kafka jars and build the node image ahead of a run")
    pr.add_argument("--kafka-version", default=D.cluster.kafka_version)
    pr.add_argument("--kafka-dist", default=None)
    pr.add_argument("--base-image", default=None)
    return p


def summary(results: dict) -> str:
    """One screen of verdict and counts."""
    counts = results.get("counts", {})
    lines = [f"valid: {results.get('valid')}"]
    lines += [f"  {k:<22} {v}" for k, v in counts.items()]
    for k, ex in results.get("examples", {}).items():
        if k != "acked":
            lines.append(f"  e.g. {k}: {ex[:5]}")
    return "\n".join(lines)


def runs_table(results: dict) -> str:
    """One line per run checked by `kchaos check DIR`: verdict, configuration, acked, lost, error."""
    head = f"{'run':<40} {'valid':<8} {'acks':<4} {'minisr':<6} {'acked':>9} {'lost':>8} {'promised':<8} faults-avail"
    lines = [f"valid: {results['valid']}", head]
    for r in results["runs"]:
        run = r["run"] if len(r["run"]) <= 40 else "…" + r["run"][-39:]
        line = (f"{run:<40} {str(r['valid']):<8} {str(r['acks']):<4} {str(r['min_insync']):<6} "
                f"{str(r['acked']):>9} {str(r['lost']):>8} {str(r['loss_promised']):<8} {r['availability_in_faults']}")
        lines.append(line + (f"\n    error: {r['error']}" if r["error"] else ""))
    return "\n".join(lines)


def _reports(args: argparse.Namespace, console: Console, argv: list[str] | None) -> int:
    """suite, compare, report and serve; errors propagate to main's handlers."""
    if args.cmd == "suite":
        from harness.suite import load_suite
        from harness.suite_run import run_suite, summary_table
        if args.resume and args.seed is not None:
            raise ConfigError("--resume continues with the suite's own seed; drop --seed")
        suite = load_suite(Path(args.file)).on_hosts(args.hosts)
        try:
            sdir, outcomes = run_suite(suite, Path(args.store), resume=args.resume, seed=args.seed,
                                       spark_master=args.spark_master, console=console,
                                       argv=["kchaos", *(argv if argv is not None else sys.argv[1:])])
        except KeyboardInterrupt:
            print(f"kchaos: suite interrupted; continue it with: kchaos suite {args.file} --resume", file=sys.stderr)
            return EXIT_INTERRUPTED
        console.print(summary_table(suite, sdir, outcomes))
        console.print(f"compare: {sdir / 'compare.html'}  junit: {sdir / 'report.xml'}")
        return 0 if all(o.passed for o in outcomes) else 1
    if args.cmd == "compare":
        from checkers import RESULTS_FILE, check_runs, find_runs
        from reports.compare import write_compare
        path = Path(args.path)
        if not path.is_dir():
            raise ConfigError(f"{path}: not a directory")
        unchecked = [r for r in find_runs(path) if not (r / RESULTS_FILE).exists()]
        if unchecked:
            console.print(f"checking {len(unchecked)} run(s) that have no results.json yet")
            check_runs(path, unchecked, args.spark_master)
        rows = write_compare(path)
        console.print(f"{len(rows)} configurations → {path / 'compare.html'}, {path / 'compare.csv'}")
        return 0
    if args.cmd == "report":
        from checkers import find_runs
        from reports.run_report import write_report
        path = Path(args.path)
        if not path.is_dir():
            raise ConfigError(f"{path}: not a directory")
        runs = [path] if (path / "history.jsonl").exists() else find_runs(path)
        if not runs:
            raise ConfigError(f"{path}: no runs (history.jsonl) below this directory")
        for run in runs:
            console.print(f"report: {write_report(run)}")
        return 0
    from reports.serve import serve
    serve(Path(args.store), args.host, args.port, say=console.print)
    return 0


def _explain(run: Path, console: Console) -> int:
    """`kchaos explain RUN`: rebuild evidence/explanation.json and report.html, print the why lines."""
    from checkers import rejudge_loss
    from harness.runner import write_report_safely
    from reports.explain import explain
    if not run.is_dir():
        raise ConfigError(f"{run}: not a run directory")
    exp = explain(run)
    if exp.ranges:
        rejudge_loss(run)
    for line in exp.why:
        print(line)
    for note in exp.notes:
        console.print(f"note: {note}", markup=False, highlight=False)
    if not exp.ranges:
        console.print("no lost writes to explain")
    write_report_safely(run, console.print)
    return 0


def _sigterm(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kchaos` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    if getattr(args, "spark_driver_host", None):
        from checkers.spark import DRIVER_HOST_ENV
        os.environ[DRIVER_HOST_ENV] = args.spark_driver_host
    signal.signal(signal.SIGTERM, _sigterm)
    # Imported late: `kchaos cleanup` and bad options must not wait for Spark or Docker imports.
    from checkers import CheckInputError, exit_code
    from clusters.distribution import DistributionError
    from clusters.cluster import ClusterError, HostCheckError
    from clusters.kafka_node import NodeError
    from clusters.remote import ConnectError, RemoteError
    from clusters.engine import EngineError
    from clusters.image import ImageError
    from harness.history import HistoryError
    from harness.store import StoreError
    from reports import ReportsInputError
    try:
        if args.cmd == "cleanup" and args.hosts:
            from clusters.ssh import cleanup_hosts
            from harness.hosts import load_hosts
            cleanup_hosts(load_hosts(args.hosts), lambda m: console.print(m, markup=False, highlight=False))
            return 0
        if args.cmd == "cleanup":
            from clusters.docker import cleanup
            removed = cleanup()
            console.print(f"removed {len(removed['containers'])} containers, {len(removed['networks'])} networks")
            return 0
        if args.cmd == "prepare":
            from harness.runner import prepare
            console.print(f"node image: {prepare(args.kafka_version, args.kafka_dist, args.base_image, console)}")
            return 0
        if args.cmd == "check":
            from checkers import HISTORY_FILE, check_path, check_tree
            path = Path(args.path)
            many = path.is_dir() and not (path / HISTORY_FILE).exists()
            results = (check_tree if many else check_path)(path, args.spark_master)
            if not many and path.is_dir() and (path / "test.json").exists():
                from harness.runner import write_report_safely
                write_report_safely(path, console.print)
            if args.json:
                print(json.dumps(results, indent=2))
            else:
                console.print(runs_table(results) if many else summary(results), markup=False, highlight=False,
                              soft_wrap=True)
            return exit_code(results["valid"])
        if args.cmd in ("suite", "compare", "report", "serve"):
            return _reports(args, console, argv)
        if args.cmd == "explain":
            return _explain(Path(args.run), console)
        if args.cmd in ("scenario", "repro", "shrink"):
            return cli_experiments.run(args, console, argv)
        from harness.runner import preflight, run_test
        cfg = preflight(config_from_args(args))
        run, results = run_test(cfg, argv=["kchaos", *(argv if argv is not None else sys.argv[1:])],
                                console=console, keep=args.keep)
        console.print(f"[bold]{cfg.name}[/] seed={cfg.seed} acks={cfg.producer.acks} "
                      f"min.insync={cfg.topic.min_insync} → {run}")
        console.print(summary(results))
        return exit_code(results["valid"])
    except (ConfigError, StoreError, CheckInputError, HistoryError, ReportsInputError) as e:
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
