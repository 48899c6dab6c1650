"""The runner: composes cluster, workload, nemesis and checker into one recorded test run.

Order (Jepsen's): set up the cluster and topic; start clients and the fault
schedule; at the time limit stop the schedule and heal everything; let the
clients run until the cluster has recovered; stop them; drain every
partition; copy Kafka's own files out (evidence/raw); tear the cluster down
while the history is checked (the check reads only the run directory's own
files); when writes were lost, explain them (docs/evidence.md), from the node
logs the teardown kept.
"""
from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from kchaos.checkers import check_path
from kchaos.checkers.parquet import CheckInputError, convert
from kchaos.checkers.spark import prestart
from kchaos.clusters.distribution import run_libs
from kchaos.core.config import TestConfig, exact_kafka_version, kafka_major, upgrade_release
from kchaos.core.faults import write_faults
from kchaos.core.history import History, read_history
from kchaos.core.kafka_versions import release_timeline
from kchaos.core.lines import LINE_WIDTH, short_lines
from kchaos.core.page_cache import describe as describe_page_cache
from kchaos.core.protocols import Cluster, Workload
from kchaos.core.send_stream import merge_streams
from kchaos.core.store import add_to_test_json, load_test_json, new_run_dir, versions, write_test_json
from kchaos.core.workload_kind import Explainer, kind_of
from kchaos.evidence.files import EVIDENCE_DIR, HISTORY_START_KEY, ISR_FILE, VIEWS_FILE
from kchaos.harness.build import Test, build_test, preflight
from kchaos.harness.monitor import IsrMonitor
from kchaos.harness.phases import WORKLOAD, Phases
from kchaos.harness.terminal import make_console, track
from kchaos.harness.warm_check import CheckRefused, answers, ask, socket_for
from kchaos.nemesis.driver import NemesisDriver
from kchaos.nemesis.schedule import kills_closer_than, save_schedule

if TYPE_CHECKING:
    from kchaos.evidence.collect import Copier

__all__ = ["prepare", "run_test", "run", "write_report_safely", "collect_evidence_safely", "explain_safely"]
log = logging.getLogger("kchaos.runner")
RECOVERY_TIMEOUT_S = 60.0
# What a run needs only at its end, imported while its cluster starts (matplotlib and Jinja2 take most of a second).
AT_THE_END = ("kchaos.reports.run.report",)
SPARK_NICENESS = 19


def _log_to(run: Path) -> logging.Handler:
    handler = logging.FileHandler(run / "harness.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


def prepare(kafka_version: str, kafka_dist: str | None = None, base_image: str | None = None,
            console: Console | None = None, checker: bool = True, upgrade_to: str | None = None) -> str:
    """Resolve the Kafka jars and build the node image (both cached); return the image tag. With a JDK on PATH and
    Kafka 4.0 or later, compile the Java client (txn, copy) against its jars too (cached; `--client java`). With
    `upgrade_to`, also resolve that release's jars and archive their start-up classes for the image's nodes, as a
    run with `--nemesis upgrade --upgrade-to` would before it starts. With `checker`, then archive Spark's start-up
    classes (`prepare_checker`)."""
    from kchaos.clusters.distribution import resolve
    from kchaos.clusters.engine import docker_client
    from kchaos.clusters.image import ensure_node_image, ensure_release_archive
    from kchaos.harness.build import java_client
    from kchaos.workloads.java_build import jdk_problem

    console = console or make_console()
    kafka_version = exact_kafka_version(kafka_version)
    to = upgrade_release(upgrade_to) if upgrade_to is not None else None
    with console.status(f"resolving Kafka {kafka_version}"):
        dist = resolve(kafka_version, kafka_dist)
    if kafka_major(dist.version) >= 4 and jdk_problem() is None:
        with console.status("compiling the Java client"):
            program = java_client(dist.version, kafka_dist)
        console.print(f"[bold cyan]•[/] Java client (kafka-clients {program.clients_version}): {program.classes}")
    def say(m: str) -> None:
        console.print(f"[bold cyan]•[/] {m}")
    client = docker_client()
    image = ensure_node_image(client, dist, base_image, say)
    if to is not None:
        with console.status(f"resolving Kafka {to}"):
            staged = resolve(to)
        ensure_release_archive(client, image, staged, say)
    if checker:
        prepare_checker(console)
    return image


def prepare_checker(console: Console | None = None) -> None:
    """Archive Spark's start-up classes once for this machine (cached; `checkers.spark_cds`), so that every check's
    Spark starts sooner; say so, or why not."""
    from rich.markup import escape

    from kchaos.checkers.spark_archive import make_archive

    console = console or make_console()
    said: list[str] = []
    with console.status("archiving Spark's start-up classes (once)"):
        path = make_archive(said.append)
    if path is not None and not said:
        said.append(f"Spark's classes: archived already, {path}")
    for m in said:
        console.print(f"[bold cyan]•[/] {escape(m)}", highlight=False)


def run_test(cfg: TestConfig, *, argv: list[str] | None = None, console: Console | None = None,
             keep: bool = False, label: str = "workload") -> tuple[Path, dict[str, Any]]:
    """Run one test end to end (`cfg` checked by preflight, then built into a Test); return its run
    directory and checker results. The run directory ends with results.json and report.html; `label`
    names the progress bar."""
    return run(build_test(preflight(cfg)), argv=argv, console=console, keep=keep, label=label)


def run(test: Test, *, argv: list[str] | None = None, console: Console | None = None,
        keep: bool = False, label: str = "workload") -> tuple[Path, dict[str, Any]]:
    """Run `test`, composing its parts in Jepsen's order (see the module docstring)."""
    console = console or make_console()
    cfg = test.cfg

    def say(m: str) -> None:
        console.print("[bold cyan]•[/] " + "\n  ".join(short_lines(m, LINE_WIDTH - 2)))
        log.info(m)

    timer = Phases()
    with timer.phase("prepare"):
        test.provisioner.prepare(test.dist, say, stage=test.upgrade_dist)
    run_dir = new_run_dir(Path(cfg.store).expanduser(), cfg.name)
    handler = _log_to(run_dir)
    say(f"run directory {run_dir}")
    write_test_json(run_dir, cfg, versions(test.dist.version, test.dist.source),
                    argv if argv is not None else sys.argv)
    if extra := {**test.record(), **test.provisioner.record()}:
        add_to_test_json(run_dir, **extra)
    save_schedule(test.schedule, run_dir / "schedule.json")
    write_faults(run_dir, list(test.faults))
    if not test.schedule and cfg.nemesis.names != ("none",):
        say(f"[yellow]no fault fits in --time-limit {cfg.time_limit:g}s with --interval {cfg.nemesis.interval:g}s "
            f"for {','.join(cfg.nemesis.names)}: this run has no faults[/]")
    session_s = cfg.cluster.broker_session_timeout_ms / 1000
    if (gap := kills_closer_than(test.schedule, session_s)) is not None:
        say(f"[yellow]kills {gap:.1f} s apart, under broker.session.timeout.ms ({session_s:g} s): a killed broker "
            f"keeps its partitions, and its restart is refused, until its session expires; writes may stop from the "
            f"first kill to the heal (docs/nemeses.md, \"Availability under repeated kills\")[/]")
    warm = _warm_check(run_dir, cfg.spark_master)
    history = History(run_dir / "history.jsonl")
    add_to_test_json(run_dir, **{HISTORY_START_KEY: round(time.time() * 1000 - history.now() / 1e6, 3)})
    cluster = test.cluster(run_dir, say)
    workload = test.workload
    driver = NemesisDriver(test.nemeses(cluster), cluster, history, test.schedule, cfg.topic.name)
    monitor = IsrMonitor(cluster.bootstrap(), cfg.topic.name, history, run_dir / ISR_FILE)
    tearing: Future[None] | None = None
    finished = False
    try:
        say(f"starting {len(set(cluster.nodes) | set(cluster.controllers))}-node Kafka {test.dist.version} cluster "
            f"({test.provisioner.kind})")
        with timer.phase("cluster start"):
            # The report's modules load while Kafka's JVMs start and elect: this process only waits on them then.
            _import_beside(AT_THE_END)
            cluster.setup()
            add_to_test_json(run_dir, page_cache=cluster.page_cache_record())
            say(describe_page_cache(load_test_json(run_dir / "test.json")))
            workload.setup(cluster)
        w = cfg.workload
        clients = kind_of(w.kind).describe(cfg)
        say(clients + f"; nemesis: {','.join(cfg.nemesis.names)}"
            + (f" ({w.full_load['why']})" if w.full_load else ""))
        with timer.phase("clients start"):  # the faults and the time limit count from the clients' readiness
            monitor.start()
            workload.start(cluster, history)
        with timer.phase(WORKLOAD):
            driver.start()
            if not w.full_load and warm is None:
                _start_spark(cfg.spark_master)
            _progress(console, cfg.time_limit, workload, driver, label)
        with timer.phase("heal"):
            say("healing: every nemesis undoes its faults; every node's Kafka runs again")
            driver.stop_and_heal()
            cluster.restore()
        with timer.phase("recovery"):
            add_to_test_json(run_dir, recovery=_wait_recovered(cluster, cfg, say))
        with timer.phase("clients stop"):
            workload.stop()
            monitor.stop()
            if w.full_load and warm is None:
                _start_spark(cfg.spark_master)
        with timer.phase("final read"):
            say("final read: draining every partition to its high watermark")
            complete = workload.final_read(cluster, history)
        if not all(complete.values()):
            say(f"[yellow]final read incomplete for partitions {[p for p, c in complete.items() if not c]}[/]")
        with timer.phase("evidence"):
            # Both only read the quiet cluster: Kafka's files are copied while the brokers' views are asked. The
            # copy, which ends in a second, is the one in a thread: an interrupt waits for it, not for the views.
            with ThreadPoolExecutor(1, thread_name_prefix="evidence") as pool:
                copying = pool.submit(collect_evidence_safely, cluster, cfg.topic.name, run_dir, say)
                sample_views_safely(cluster, cfg.topic.name, run_dir, say)
                copying.result()
        finished = True
    except BaseException:
        log.exception("run stopped by an exception; healing and tearing down")
        raise
    finally:
        driver.stop_and_heal(finish=False)  # a no-op after the heal above; at once when interrupted
        workload.stop()
        monitor.stop()
        history.close()
        merge_streams(run_dir)
        if "upgrade" in test.specs:
            _record_releases(run_dir, cfg, cluster)
        if not keep:
            tearing = _tear_down(cluster, timer, beside=finished)
        if tearing is None:
            logging.getLogger().removeHandler(handler)
            handler.close()
    drawing = _draw_beside(run_dir, kind_of(cfg.workload.kind).parquet)
    say("checking the history with Spark" if warm is None else
        f"checking the history on the warm Spark of kchaos serve --warm-check of {warm.parent}")
    try:
        with timer.phase("check"):
            results = _check(run_dir, cfg.spark_master, warm, say)
    finally:
        if tearing is not None:
            try:
                tearing.result()  # the explanation reads the node logs the teardown keeps; its error is the run's
            finally:
                logging.getLogger().removeHandler(handler)
                handler.close()
    explainer = kind_of(cfg.workload.kind).explainer
    if explainer is not None and explainer.wanted(results.get("counts") or {}):
        with timer.phase("explain"):
            results = explain_safely(explainer, run_dir, say) or results
    timer.write(run_dir)  # for the report to link to; written again with the report's own time below
    with timer.phase("report"):
        drawing.result()
        write_report_safely(run_dir, say)
    timer.write(run_dir)
    say(timer.line())
    return run_dir, results


def _warm_check(run_dir: Path, spark_master: str) -> Path | None:
    """The socket of the `kchaos serve --warm-check` that holds the store of `run_dir`, whose warm Spark checks
    the run as this process's would, without a Spark started for it; None when none does, or when --spark-master
    names another Spark."""
    sock = socket_for(run_dir) if spark_master == TestConfig.spark_master else None
    return sock if sock is not None and answers(sock) else None


def _check(run_dir: Path, spark_master: str, warm: Path | None, say: Callable[[str], None]) -> dict[str, Any]:
    """The run's results: checked on the warm Spark of `warm` (`_warm_check`) when it answers, else here."""
    if warm is not None:
        try:
            answered = ask(run_dir, report=False)  # the run writes its report once it has explained the results
        except CheckRefused:
            answered = None  # bad input: the check here raises it as its own error
        if answered is not None:
            return answered[0]
        say("the warm check did not answer: checking the history with Spark here")
    return check_path(run_dir, spark_master, find_libs=run_libs)


def _start_spark(spark_master: str) -> None:
    """Start Spark's JVM and Python workers in the background, returning at once, so that the check finds them
    ready. Called once the clients write: those seconds of CPU then overlap the workload's fixed length rather
    than the cluster's start, where they would compete with Kafka's JVMs; at the lowest priority, so that the
    clients in this process keep their pace. A full-load run, which measures what the cluster can take, calls
    it once its clients stop."""
    prestart(spark_master, niceness=SPARK_NICENESS)


def _draw_beside(run_dir: Path, parquet: bool) -> Future[None]:
    """Draw the report's plots in a thread while the run is checked (`predraw`), returning at once. A workload
    whose checker and report read the history's Parquet form has it written first, here: the check then finds
    it up to date, and the two never write it at once."""
    from kchaos.reports.run.report import predraw

    if parquet:
        try:
            convert(run_dir / "history.jsonl", validate=True)
        except CheckInputError:
            pass  # the check says so, in its own words
    def draw() -> None:
        # Linux keeps a nice value per thread: the plots take the CPU the check leaves, as Spark's JVM does.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), SPARK_NICENESS)
        predraw(run_dir)
    return _beside("predraw", draw)


def _import_beside(modules: tuple[str, ...]) -> None:
    """Import `modules` in a thread of their own, returning at once. An import that fails here fails again, and
    is reported, where the module is used."""
    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:
                return
    threading.Thread(target=load, name="imports", daemon=True).start()


def _tear_down(cluster: Cluster, timer: Phases, beside: bool) -> Future[None] | None:
    """Tear `cluster` down, timed as the teardown phase: in a thread whose future is returned when `beside` (the
    run finished, and the check may run meanwhile), else here and now (an interrupted run tears down first)."""
    def teardown() -> None:
        with timer.phase("teardown"):
            cluster.teardown()
    if not beside:
        teardown()
        return None
    return _beside("teardown", teardown)


def _beside(name: str, fn: Callable[[], None]) -> Future[None]:
    """`fn` in a thread of its own, returning at once; the thread runs on, and the interpreter waits for it at exit,
    even after an interrupt."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=name)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def _record_releases(run_dir: Path, cfg: TestConfig, cluster: Cluster) -> None:
    """test.json's `releases`: which Kafka release each node ran when (a rolling upgrade)."""
    try:
        ops = read_history(run_dir / "history.jsonl")
        first = {n: cfg.cluster.kafka_version for n in cluster.release}
        add_to_test_json(run_dir, releases=release_timeline(ops, first))
    except Exception:
        log.exception("test.json: releases not recorded")


def write_report_safely(run: Path, say: Callable[[str], None]) -> Path | None:
    """Write run/report.html; a plotting failure is reported and logged, never fatal to the run."""
    try:
        from kchaos.reports.run.report import write_report

        path = write_report(run)
    except Exception as e:
        log.exception("report.html failed")
        say(f"[yellow]report.html not written: {type(e).__name__}: {e}[/]")
        return None
    say(f"report: {path}")
    return path


def sample_views_safely(cluster: Cluster, topic: str, run: Path, say: Callable[[str], None]) -> None:
    """Write evidence/views.json: every broker's own view of the partitions, asked until they agree or the
    recovery time has passed (`kchaos.clusters.views`), for the agreement checks; never fatal."""
    from kchaos.clusters.views import sample_views

    try:
        views = sample_views(cluster, topic, RECOVERY_TIMEOUT_S)
    except Exception as e:
        log.exception("brokers' views not sampled")
        say(f"[yellow]brokers' views not sampled: {type(e).__name__}: {e}[/]")
        return
    if not views["agreed"]:
        say(f"[yellow]the brokers' views of the partitions still differed after {RECOVERY_TIMEOUT_S:.0f} s[/]")
    (run / EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
    (run / EVIDENCE_DIR / VIEWS_FILE).write_text(json.dumps(views, indent=1) + "\n", encoding="utf-8")


def collect_evidence_safely(cluster: Copier, topic: str, run: Path, say: Callable[[str], None]) -> None:
    """Copy Kafka's own files (segments, epoch checkpoints, metadata log) into run/evidence/raw; never fatal."""
    from kchaos.evidence.collect import collect

    try:
        copies = collect(cluster, topic, run / "evidence" / "raw")
    except Exception as e:
        log.exception("evidence not collected")
        say(f"[yellow]Kafka's files not collected: {type(e).__name__}: {e}[/]")
        return
    for c in copies:
        if c.error or c.skipped:
            say(f"[yellow]evidence from {c.node}: {c.error or c.skipped}[/]")
    log.info("evidence: %s", ", ".join(f"{c.node} {c.files} files {c.bytes} bytes" for c in copies))


def explain_safely(explainer: Explainer, run: Path, say: Callable[[str], None]) -> dict[str, Any] | None:
    """Explain the run's anomalies from Kafka's files (its workload's `explainer`: explanation.json for lost
    writes; txn_explanation.json for anomalous
    transactions), say the largest groups by cause, and return the results as they now are (None on failure,
    never fatal)."""
    handler = _log_to(run)
    try:
        for line in explainer.summary(explainer.explain(run, run_libs), run):
            say(line)
        return json.loads((run / "results.json").read_text(encoding="utf-8"))
    except Exception as e:
        log.exception("explanation failed")
        say(f"[yellow]anomalies not explained: {type(e).__name__}: {e}[/]")
        return None
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()


def _progress(console: Console, limit: float, workload: Workload, driver: NemesisDriver, label: str) -> None:
    def stats() -> str:
        c = workload.counts
        return (f"sent {c['send']} ok {c['ok']} info {c['info']} fail {c['fail']} read {c['polled']} "
                f"faults {driver.applied}")

    track(console, label, limit, stats)


def _wait_recovered(cluster: Cluster, cfg: TestConfig, say: Callable[[str], None]) -> dict[str, Any]:
    """Wait for every broker, a full ISR everywhere and the KRaft controllers agreed on one leader; carry on (and
    say so) if that does not happen. Return test.json's `recovery`: `recovered`, the seconds each wait was given
    (`within_s`), and Kafka's answer when it did not."""
    try:
        cluster.wait_brokers(RECOVERY_TIMEOUT_S)
        cluster.wait_topic(cfg.topic.name, cfg.topic.replication_factor, RECOVERY_TIMEOUT_S)
        cluster.wait_quorum(RECOVERY_TIMEOUT_S)
    except Exception as e:
        error = _first_words(str(e))
        say(f"[yellow]cluster did not fully recover within {RECOVERY_TIMEOUT_S:.0f}s: {error}[/]")
        return {"recovered": False, "within_s": RECOVERY_TIMEOUT_S, "error": error}
    return {"recovered": True, "within_s": RECOVERY_TIMEOUT_S}


def _first_words(error: str) -> str:
    """An error in one line: its first line, with the first ERROR line of the Kafka log tail it quotes, if any
    (`n2: Kafka exited during startup (Error while reading checkpoint file ...)`)."""
    lines = error.splitlines() or [""]
    first = lines[0].rstrip(": ")
    logged = next((line.split(" ERROR ", 1)[1] for line in lines[1:] if " ERROR " in line), None)
    return f"{first} ({logged})" if logged else first
