"""Benchmark: the same run in Docker containers and on SSH hosts, side by side in one invocation.

    python bench/ssh_vs_docker.py [--time-limit 60] [--seed 5] [--nemesis kill-leader]

Runs `kchaos run` once on the Docker backend and once with `--hosts` on three SSH test hosts
(tests/integration/ssh_hosts.py: containers of the project's base image reached only over SSH),
same options and seed, one after the other. Prints, for each: recorded ok sends per second over
the workload, the number of faults applied, and the time from a fault's invoke to its completion
(the fault applied: command sent, run on the node, answered), median and maximum, read from the
history; then the SSH/Docker ratios.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from fault_timings import fault_ops  # noqa: E402
from ssh_hosts import ssh_hosts  # noqa: E402

from kchaos.core.history import read_history  # noqa: E402


def measure(run: Path, time_limit: float) -> dict[str, float]:
    """ok sends per second, faults applied, and fault invoke-to-completion seconds of one run directory."""
    oks = sum(1 for o in read_history(run / "history.jsonl") if o["f"] == "send" and o["type"] == "ok")
    lat = [seconds for _, seconds in fault_ops(run)]
    return {"ok_per_s": oks / time_limit, "faults": len(lat),
            "fault_median_s": statistics.median(lat) if lat else float("nan"),
            "fault_max_s": max(lat) if lat else float("nan")}


def kchaos_run(store: Path, extra: list[str], a: argparse.Namespace) -> Path:
    cmd = [sys.executable, "-m", "kchaos", "run", "--store", str(store), "--time-limit", str(a.time_limit),
           "--seed", str(a.seed), "--nemesis", a.nemesis, "--acks", "all", "--rate", str(a.rate), *extra]
    subprocess.run(cmd, cwd=REPO, check=False, stdout=subprocess.DEVNULL)
    return (store / "latest").resolve()


def main() -> None:
    """Run both, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--nemesis", default="kill-leader")
    a = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows["docker"] = measure(kchaos_run(Path(tmp) / "docker", [], a), a.time_limit)
        with ssh_hosts(3) as hosts:
            rows["ssh"] = measure(kchaos_run(Path(tmp) / "ssh", ["--hosts", str(hosts.hosts_file)], a), a.time_limit)
    print(f"{'backend':<8} {'ok/s':>8} {'faults':>6} {'fault median s':>14} {'fault max s':>11}")
    for name, r in rows.items():
        print(f"{name:<8} {r['ok_per_s']:>8.1f} {r['faults']:>6} {r['fault_median_s']:>14.3f} "
              f"{r['fault_max_s']:>11.3f}")
    d, s = rows["docker"], rows["ssh"]
    print(f"ssh/docker: ok/s {s['ok_per_s'] / d['ok_per_s']:.2f}, fault median "
          f"{s['fault_median_s'] / d['fault_median_s']:.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
