"""Benchmark: how long each fault takes to apply and to heal, on the Docker and the SSH backend, side by side.

    python bench/fault_timings.py [--faults kill,pause,...] [--backends docker,ssh] [--hold 5] [--settle 10]
                                  [--seed 3] [--json FILE]

One `kchaos run` per backend (same options, same seed) plays a schedule that applies every fault in
turn, once: the break op at t, its mend op `--hold` seconds later, the next fault `--settle` seconds
after that, under a light acks=all load on lazyfs (segments rolled every 10 s, so `corrupt` finds a
closed one). The SSH run uses three SSH test hosts (tests/integration/ssh_hosts.py: containers of the
project's base image reached only over SSH).

Apply time is the break op's invoke to its completion in the history (the fault is in place on every
target: command sent, run on the node, answered); heal time is the mend op's. For faults that
restart Kafka (kill, stop, power-fail) the heal is `kafka-ctl start`: the process is started, not
yet back in the ISR. The default faults are every registered one with a mend op, except those that
need the workload (crash-client), dedicated controllers (partition-quorum*) or a second release
(upgrade). Prints one row per fault: apply and heal seconds on each backend and the SSH/Docker ratio.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from kchaos import nemesis  # noqa: E402
from kchaos.core.config import TestConfig  # noqa: E402
from kchaos.core.history import read_history  # noqa: E402


def default_faults() -> list[str]:
    """Every package that mends what it breaks and needs only the nodes."""
    return [name for name, p in nemesis.PACKAGES.items()
            if len(p.fs) > 1 and p.mends and not p.needs_workload and not p.needs_controllers]


def first_fault(name: str, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The package's own first break op (its default target, drawn as a run would) and its mend op."""
    pkg = nemesis.PACKAGES[name]
    ops = pkg.schedule(random.Random(seed), TestConfig(time_limit=600), name, None)
    brk = next(o.op for o in ops if o.op["f"] == pkg.fs[0])
    return brk, {"f": pkg.fs[1]}


def schedule(faults: list[str], hold: float, settle: float, seed: int) -> tuple[list[dict[str, Any]], float]:
    """The schedule.json entries applying each fault once, in turn, and the time limit that fits them."""
    out, t = [], 5.0
    for name in faults:
        brk, mend = first_fault(name, seed)
        out += [{"at": t, "nemesis": name, "op": brk}, {"at": t + hold, "nemesis": name, "op": mend}]
        t += hold + settle
    return out, t


def fault_ops(run: Path) -> list[tuple[dict[str, Any], float]]:
    """Each nemesis op of a run that completed ok (the final heal aside): its invocation and the seconds from
    it to the completion."""
    out: list[tuple[dict[str, Any], float]] = []
    pending: dict[str, Any] | None = None
    for o in read_history(run / "history.jsonl"):  # one nemesis process: each invoke, then its completion
        if o["process"] != "nemesis" or o["f"] == "heal":
            continue
        if o["type"] == "invoke":
            pending = o
        elif pending is not None:
            if o["type"] == "ok":
                out.append((pending, (o["time"] - pending["time"]) / 1e9))
            pending = None
    return out


def timings(run: Path) -> dict[str, dict[str, float]]:
    """Per nemesis: seconds from its break op's invoke to completion ("apply") and its mend op's ("heal")."""
    out: dict[str, dict[str, float]] = {}
    for op, seconds in fault_ops(run):
        key = "apply" if op["f"] == nemesis.PACKAGES[op["nemesis"]].fs[0] else "heal"
        out.setdefault(op["nemesis"], {})[key] = seconds
    return out


def kchaos_run(store: Path, sched: Path, time_limit: float, seed: int, extra: list[str]) -> Path:
    """One run playing `sched`; its run directory."""
    cmd = [sys.executable, "-m", "kchaos", "run", "--store", str(store), "--schedule", str(sched),
           "--time-limit", str(time_limit), "--seed", str(seed), "--acks", "all", "--rate", "50",
           "--storage", "lazyfs", "--segment-ms", "10000", *extra]
    subprocess.run(cmd, cwd=REPO, check=False, stdout=subprocess.DEVNULL)
    return (store / "latest").resolve()


def main() -> None:
    """Run the schedule on each backend; print the table (and write it as JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", help="comma-separated nemesis names (default: every one that mends, see above)")
    ap.add_argument("--backends", default="docker,ssh")
    ap.add_argument("--hold", type=float, default=5.0, help="seconds each fault stays before its mend")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds after a mend before the next fault")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--json", help="also write the table to this file")
    a = ap.parse_args()
    faults = a.faults.split(",") if a.faults else default_faults()
    unknown = [f for f in faults if f not in nemesis.PACKAGES]
    if unknown:
        sys.exit(f"fault_timings: unknown nemesis {', '.join(unknown)}; known: {', '.join(nemesis.PACKAGES)}")
    entries, time_limit = schedule(faults, a.hold, a.settle, a.seed)
    rows: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sched = Path(tmp) / "schedule.json"
        sched.write_text(json.dumps(entries))
        for backend in a.backends.split(","):
            if backend == "ssh":
                from ssh_hosts import ssh_hosts
                with ssh_hosts(3) as hosts:
                    run = kchaos_run(Path(tmp) / backend, sched, time_limit, a.seed,
                                     ["--hosts", str(hosts.hosts_file)])
                    rows[backend] = timings(run)
            else:
                rows[backend] = timings(kchaos_run(Path(tmp) / backend, sched, time_limit, a.seed, []))
    backends = list(rows)
    head = f"{'fault':<26}" + "".join(f"{b + ' apply s':>15}{b + ' heal s':>14}" for b in backends)
    if backends == ["docker", "ssh"]:
        head += f"{'ssh/docker apply':>18}{'heal':>7}"
    print(head)
    for f in faults:
        cells = [rows[b].get(f, {}) for b in backends]
        line = f"{f:<26}" + "".join(f"{c.get('apply', float('nan')):>15.2f}{c.get('heal', float('nan')):>14.2f}"
                                    for c in cells)
        if backends == ["docker", "ssh"]:
            d, s = cells
            ratio = [s[k] / d[k] if d.get(k) and k in s else float("nan") for k in ("apply", "heal")]
            line += f"{ratio[0]:>18.2f}{ratio[1]:>7.2f}"
        print(line)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
