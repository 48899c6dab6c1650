"""Benchmark: a 100-run suite directory checked on a standalone Spark cluster (master + two workers).

    python bench/check_cluster.py [RUNS] [OPS]      (default: 100 20000)

Starts a standalone master and two workers (one core, 2 GB each) from the pyspark
installation, bound to 127.0.0.1 only, writes RUNS labelled corpus runs of about OPS history
lines each below one directory (a suite), and checks that directory with `check_tree` with
the cluster as Spark master (the driver is this process, on loopback). Prints the wall time,
every run's counts against its labels, and, from the driver's status API on loopback, the
tasks each executor ran and every stage's shuffle read and write, then stops the cluster.

Why a suite rather than a 100M-operation history: on this 2-core machine writing a 100M-line
corpus history takes about 22 minutes (and its JSON 15 GB), while 100 runs exercise exactly
what a nightly suite does: many histories, one Spark job per step for all of them.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from spark_standalone import StandaloneSpark, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/corpora: the labelled histories

WORKERS = 2


def driver_session(url: str, ui_port: int):
    """The process's Spark session on the cluster, with its status API on loopback (the checker's own
    sessions run without a UI); checkers.spark.spark_session() then returns this one."""
    from kchaos.checkers import spark as kspark

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master(url).appName("kchaos-check-cluster-bench")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "true").config("spark.ui.port", str(ui_port))
               .config("spark.executor.memory", "1500m").config("spark.pyspark.python", sys.executable)
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    kspark._session = session
    return session


def api(ui_port: int, app: str, path: str) -> list | dict:
    """GET the driver's status API on loopback."""
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/{path}", timeout=30) as r:
        return json.loads(r.read())


def main(runs: int, ops: int) -> None:
    """Run the benchmark: `runs` runs of about `ops` lines, one suite directory, on the cluster."""
    from corpora.queue import write_large

    from kchaos.checkers import check_tree

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        suite = tmp / "suite"
        start = time.perf_counter()
        labels = {}
        for i in range(runs):
            c = write_large(suite / f"cell-{i % 10}" / f"rep-{i // 10 + 1}", seed=i, ops=ops)
            labels[f"cell-{i % 10}/rep-{i // 10 + 1}"] = ({k: len(v) for k, v in c.planted.items()}, c.lines)
        lines = sum(n for _, n in labels.values())
        print(f"wrote {runs} runs, {lines:,} history lines, in {time.perf_counter() - start:.1f} s", flush=True)
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        with StandaloneSpark(tmp, workers=WORKERS, memory="2g") as cluster:
            ui = free_port()
            session = driver_session(cluster.url, ui)
            app = session.sparkContext.applicationId
            start = time.perf_counter()
            result = check_tree(suite, cluster.url)
            took = time.perf_counter() - start
            match = sum(all(r[k] == n for k, n in labels[r["run"]][0].items()) for r in result["runs"])
            print(f"check_tree on {cluster.url}: {took:.1f} s for {runs} runs ({lines / took:,.0f} lines/s); "
                  f"labels match in {match} of {len(result['runs'])} runs")
            print(f"load average after: {os.getloadavg()[0]:.2f}")
            executors = [e for e in api(ui, app, "allexecutors") if e["id"] != "driver"]
            for e in sorted(executors, key=lambda e: e["id"]):
                print(f"executor {e['id']} ({e['hostPort']}): {e['totalTasks']} tasks, "
                      f"{e['totalDuration'] / 1000:.1f} s task time, shuffle read {e['totalShuffleRead']} B, "
                      f"shuffle write {e['totalShuffleWrite']} B")
            for s in sorted(api(ui, app, "stages"), key=lambda s: s["stageId"]):
                print(f"stage {s['stageId']} ({s.get('description') or s['name']}): {s['numTasks']} tasks, "
                      f"shuffle read {s['shuffleReadBytes']} B, shuffle write {s['shuffleWriteBytes']} B")
            session.stop()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [100, 20_000][len(args):]))
