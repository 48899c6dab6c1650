"""`kchaos` command line: run, check, cleanup.

Exit codes: 0 valid, 1 invalid, 2 unknown, 3 bad input (options, paths,
histories), 4 environment (no Docker Engine, no Kafka jars, image build),
5 the cluster failed, 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
from pathlib import Path
from typing import NoReturn

from rich.console import Console

from harness.config import (ClusterConfig, ConfigError, NemesisConfig, ProducerConfig, TestConfig,
                            TopicConfig, WorkloadConfig)

EXIT_BAD_INPUT, EXIT_ENV, EXIT_CLUSTER, EXIT_INTERRUPTED = 3, 4, 5, 130
D = TestConfig()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's own exit code 2 would read as "unknown"
        print(f"kchaos: error: {message}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _csv(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in s.split(",") if x.strip())


def _spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spark-master", default=D.spark_master,
                   help="where the checker runs: local[N] (default local[*]) or an existing cluster, "
                        "spark://HOST:7077 (see docs/checkers.md)")
    p.add_argument("--spark-driver-host", default=None, metavar="ADDR",
                   help="local address the Spark driver binds and advertises, for a remote --spark-master "
                        "whose executors must connect back (default: 127.0.0.1)")


def add_run_options(r: argparse.ArgumentParser) -> None:
    """Every `kchaos run` option; suite files name the same options (see harness/suite.py)."""
    r.add_argument("--name", default=D.name, help="test name (directory under the store)")
    r.add_argument("--nodes", type=int, default=D.cluster.nodes, help="brokers (n1..nN)")
    r.add_argument("--controllers", type=int, default=D.cluster.controllers,
                   help="dedicated KRaft controllers; 0 = combined broker+controller nodes")
    r.add_argument("--partitions", type=int, default=D.topic.partitions)
    r.add_argument("--rf", type=int, default=D.topic.replication_factor, help="replication factor")
    r.add_argument("--min-insync", type=int, default=D.topic.min_insync, help="min.insync.replicas")
    r.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=D.topic.unclean,
                   help="unclean.leader.election.enable")
    r.add_argument("--flush-messages", type=int, default=D.topic.flush_messages, metavar="N",
                   help="flush.messages: fsync the log every N records (default 0: never, Kafka's default)")
    r.add_argument("--acks", default=D.producer.acks, help="0, 1 or all")
    r.add_argument("--idempotence", action=argparse.BooleanOptionalAction, default=D.producer.idempotence)
    r.add_argument("--retries", type=int, default=D.producer.retries)
    r.add_argument("--linger-ms", type=int, default=D.producer.linger_ms)
    r.add_argument("--max-in-flight", type=int, default=D.producer.max_in_flight)
    r.add_argument("--delivery-timeout-ms", type=int, default=D.producer.delivery_timeout_ms)
    r.add_argument("--request-timeout-ms", type=int, default=D.producer.request_timeout_ms)
    r.add_argument("--nemesis", type=_csv, default=None,
                   help="comma-separated faults, each optionally NAME:TARGET (e.g. kill:majority), or none; "
                        "see docs/nemeses.md (default: kill-leader)")
    r.add_argument("--mix-families", type=_csv, default=None, metavar="FAMILIES",
                   help="with --nemesis mix: comma-separated fault families it draws from: process, network, "
                        "page-cache, slow, operator (default: all but operator)")
    r.add_argument("--schedule", default=None, metavar="FILE",
                   help="replay this schedule.json (from a run directory or written by hand) instead of "
                        "drawing faults from the seed; the nemeses are the ones it names")
    r.add_argument("--interval", type=float, default=D.nemesis.interval, help="seconds between faults")
    r.add_argument("--jitter", type=float, default=D.nemesis.jitter, help="fraction of interval")
    r.add_argument("--restart-delay", type=float, default=D.nemesis.restart_delay,
                   help="seconds a killed node stays down")
    r.add_argument("--time-limit", type=float, default=D.time_limit, help="seconds of workload")
    r.add_argument("--rate", type=float, default=D.workload.rate, help="target sends per second")
    r.add_argument("--producers", type=int, default=D.workload.producers)
    r.add_argument("--consumers", type=int, default=D.workload.consumers)
    r.add_argument("--seed", type=int, default=None, help="seed for every random choice (default: random)")
    r.add_argument("--kafka-version", default=D.cluster.kafka_version)
    r.add_argument("--kafka-dist", default=None, help="extracted kafka_2.13-3.7.x directory or .tgz (or KAFKA_HOME)")
    r.add_argument("--base-image", default=None, help="existing image to build nodes on instead of debootstrap")
    r.add_argument("--subnet", default=D.cluster.subnet)
    r.add_argument("--replica-lag-time-max-ms", type=int, default=D.cluster.replica_lag_time_max_ms)
    r.add_argument("--broker-session-timeout-ms", type=int, default=D.cluster.broker_session_timeout_ms)
    r.add_argument("--storage", default=D.cluster.storage,
                   help="lazyfs (unsynced writes can be lost on power-fail), plain, or auto: lazyfs when a "
                        "nemesis needs it")
    r.add_argument("--writeback-age", type=float, default=D.cluster.writeback_age_s, metavar="SECONDS",
                   help="lazyfs writes unsynced data through once it is this old (the kernel's dirty expiry); "
                        "0 = never")
    r.add_argument("--store", default=D.store, help="results root")
    _spark_options(r)
    r.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")


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
    _spark_options(c)
    s = sub.add_parser("suite", help="run every cell of a suite file (a matrix of run options), with a "
                                     "comparison, JUnit report.xml and a summary at the end")
    s.add_argument("file", help="suite YAML file (see suites/ and docs/suites.md)")
    s.add_argument("--resume", action="store_true", help="continue the newest interrupted run of this suite")
    s.add_argument("--seed", type=int, default=None, help="suite seed (default: the file's, else random)")
    s.add_argument("--store", default=D.store, help="results root (the suite goes in STORE/suites/NAME/)")
    _spark_options(s)
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
    from harness.cli_experiments import add_parsers
    add_parsers(sub, _spark_options)
    ex = sub.add_parser("explain", help="(re)build a run's explanation of its lost writes from the Kafka files it "
                                        "collected (RUN/evidence/raw) and print why each lost range was lost")
    ex.add_argument("run", help="a run directory")
    sub.add_parser("cleanup", help="remove every container and network kchaos made")
    pr = sub.add_parser("prepare", help="fetch the Kafka jars and build the node image ahead of a run")
    pr.add_argument("--kafka-version", default=D.cluster.kafka_version)
    pr.add_argument("--kafka-dist", default=None)
    pr.add_argument("--base-image", default=None)
    return p


def config_from_args(a: argparse.Namespace) -> TestConfig:
    """A TestConfig from parsed `run` arguments (not yet validated)."""
    seed = a.seed if a.seed is not None else secrets.randbelow(2**31)
    if a.schedule and a.nemesis:
        raise ConfigError("--schedule names its own nemeses; drop --nemesis")
    if a.mix_families is not None and "mix" not in (a.nemesis or ()):
        raise ConfigError("--mix-families only applies to --nemesis mix")
    return TestConfig(
        name=a.name, seed=seed, time_limit=a.time_limit, store=a.store, spark_master=a.spark_master,
        topic=TopicConfig(partitions=a.partitions, replication_factor=a.rf, min_insync=a.min_insync,
                          unclean=a.unclean, flush_messages=a.flush_messages),
        producer=ProducerConfig(acks=str(a.acks), idempotence=a.idempotence, retries=a.retries,
                                linger_ms=a.linger_ms, max_in_flight=a.max_in_flight,
                                delivery_timeout_ms=a.delivery_timeout_ms, request_timeout_ms=a.request_timeout_ms),
        cluster=ClusterConfig(nodes=a.nodes, controllers=a.controllers, kafka_version=a.kafka_version,
                              kafka_dist=a.kafka_dist, base_image=a.base_image, subnet=a.subnet,
                              replica_lag_time_max_ms=a.replica_lag_time_max_ms,
                              broker_session_timeout_ms=a.broker_session_timeout_ms, storage=a.storage,
                              writeback_age_s=a.writeback_age),
        workload=WorkloadConfig(producers=a.producers, consumers=a.consumers, rate=a.rate),
        nemesis=NemesisConfig(names=a.nemesis or D.nemesis.names, interval=a.interval, jitter=a.jitter,
                              restart_delay=a.restart_delay, schedule_file=a.schedule,
                              mix_families=D.nemesis.mix_families if a.mix_families is None else a.mix_families),
    )


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
        suite = load_suite(Path(args.file))
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
    from clusters.docker import ClusterError
    from clusters.engine import EngineError
    from clusters.image import ImageError
    from harness.history import HistoryError
    from harness.store import StoreError
    from reports import ReportsInputError
    try:
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
            from harness.cli_experiments import run as experiment
            return experiment(args, console, argv)
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
    except (EngineError, DistributionError, ImageError) as e:
        print(f"kchaos: error: {e}", file=sys.stderr)
        return EXIT_ENV
    except ClusterError as e:
        print(f"kchaos: cluster error: {e}", file=sys.stderr)
        return EXIT_CLUSTER
    except KeyboardInterrupt:
        print("kchaos: interrupted; the history so far is in the run directory", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
