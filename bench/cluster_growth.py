"""Benchmark: what a run costs as the cluster and the topic grow, 3 brokers and 3 partitions against 6 and 48.

    python bench/cluster_growth.py [--shapes 3x3,6x48] [--time-limit 30] [--rate 200] [--seed 5] [--keep DIR]

For each shape NODESxPARTITIONS, one after the other, the same run on Docker: `kchaos run --nodes N
--partitions P --acks all --min-insync 2 --nemesis kill-leader --interval 10` at the same rate and seed, kept
running at its end (`--keep`). Measured: the harness process's peak resident memory (its VmRSS, sampled every
0.2 s from outside), the run's phases (phases.json: cluster start, final read, check, report), the ISR monitor's
record (isr.jsonl lines and bytes per second of workload) and the time of one of its samples (the metadata call it
makes each second, timed 20 times against the kept cluster), then `kchaos explain` and `kchaos check` of the run in
fresh processes, the size of report.html and of the history. Then the ratio of each figure between the last
shape and the first, beside the ratio of the work (acknowledged writes, partitions): nothing should grow faster
than the work it does. Every cluster is removed at the end (`kchaos cleanup`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import docker

from kchaos.clusters import admin
from kchaos.clusters.engine import LABEL

KCHAOS = [sys.executable, "-m", "kchaos"]


def peak_rss_mb(proc: subprocess.Popen) -> float:
    """Sample /proc/PID/status's VmRSS until the process ends; the largest, in MiB."""
    peak = 0
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            break
        time.sleep(0.2)
    return peak / 1024


def bootstrap() -> str:
    """The kept cluster's brokers, from the containers kchaos labelled."""
    found = []
    for c in docker.from_env().containers.list(filters={"label": LABEL}):
        if c.name.startswith("kchaos-n"):
            ip = next(iter(c.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
            found.append(f"{ip}:9092")
    return ",".join(sorted(found))


def sample_ms(topic: str, times: int = 20) -> float:
    """Median milliseconds of the ISR monitor's metadata call against the kept cluster."""
    boot = bootstrap()
    client = admin.admin_client(boot, timeout_ms=1000)
    admin.partitions(boot, topic, client=client)  # the connection is made once, as the monitor's is
    took = []
    for _ in range(times):
        t0 = time.monotonic()
        admin.partitions(boot, topic, timeout=5, client=client)
        took.append((time.monotonic() - t0) * 1000)
    return statistics.median(took)


def timed(*args: str) -> float:
    t0 = time.monotonic()
    subprocess.run([*KCHAOS, *args], capture_output=True, text=True)
    return time.monotonic() - t0


def measure(nodes: int, partitions: int, a: argparse.Namespace, root: Path) -> dict[str, float]:
    store = root / f"n{nodes}p{partitions}"
    proc = subprocess.Popen([*KCHAOS, "run", "--nodes", str(nodes), "--partitions", str(partitions), "--acks", "all",
                             "--min-insync", "2", "--nemesis", "kill-leader", "--interval", "10", "--time-limit",
                             str(a.time_limit), "--rate", str(a.rate), "--seed", str(a.seed), "--store", str(store),
                             "--keep", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak: list[float] = []
    watcher = threading.Thread(target=lambda: peak.append(peak_rss_mb(proc)))
    watcher.start()
    proc.wait()
    watcher.join()
    run = (store / "latest").resolve()
    try:
        topic = json.loads((run / "test.json").read_text())["topic"]["name"]
        ms = sample_ms(topic)
    finally:
        subprocess.run([*KCHAOS, "cleanup"], capture_output=True)
    phases = json.loads((run / "phases.json").read_text())["phases"]
    results = json.loads((run / "results.json").read_text())
    isr = run / "isr.jsonl"
    seconds = phases["workload"]
    return {"acked": results["counts"]["acked"], "verdict": results.get("verdict"), "harness_mb": peak[0],
            "cluster_start_s": phases["cluster start"], "final_read_s": phases["final read"],
            "check_in_run_s": phases["check"], "report_in_run_s": phases["report"],
            "isr_lines_per_s": sum(1 for _ in isr.open()) / seconds,
            "isr_kb_per_s": isr.stat().st_size / 1024 / seconds,
            "isr_sample_ms": ms, "explain_s": timed("explain", str(run)), "check_s": timed("check", str(run)),
            "report_kb": (run / "report.html").stat().st_size / 1024,
            "history_mb": (run / "history.jsonl").stat().st_size / 1024 / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="3x3,6x48", help="NODESxPARTITIONS, comma-separated, smallest first")
    ap.add_argument("--time-limit", type=float, default=30)
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--keep", default=None, metavar="DIR", help="keep the runs in DIR (default: a temporary one)")
    a = ap.parse_args()
    root = Path(a.keep or tempfile.mkdtemp(prefix="kchaos-growth-"))
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    rows = {s: measure(*s, a, root) for s in shapes}
    keys = list(next(iter(rows.values())))
    print(f"kchaos run --acks all --min-insync 2 --nemesis kill-leader --interval 10 --time-limit {a.time_limit:g} "
          f"--rate {a.rate} --seed {a.seed}; runs in {root}")
    print("| figure | " + " | ".join(f"{n} brokers, {p} partitions" for n, p in shapes) + " | last / first |")
    print("|---|" + "---:|" * (len(shapes) + 1))
    first, last = rows[shapes[0]], rows[shapes[-1]]
    for k in keys:
        cells = [f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k]) for r in rows.values()]
        ratio = f"{last[k] / first[k]:.2f}" if isinstance(first[k], (int, float)) and first[k] else "-"
        print(f"| {k} | " + " | ".join(cells) + f" | {ratio} |")
    print(f"work: acknowledged writes {last['acked'] / first['acked']:.2f}x, partitions "
          f"{shapes[-1][1] / shapes[0][1]:.0f}x, brokers {shapes[-1][0] / shapes[0][0]:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
