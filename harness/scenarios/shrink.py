"""Shrinking a failing run's fault schedule: fewer faults, fewer nodes, shorter faults, a shorter run.

A schedule is cut into episodes: a fault and the op that mends it (kill and
start, start-partition and stop-partition, ...), or a lone op (roll). The
search keeps the run's configuration and seed and tries candidates made from
the smallest reproducing schedule so far, greedily, in passes:

1. drop   remove episodes, halves first then single ones (delta debugging);
2. narrow aim an episode at fewer nodes: all -> majority -> minority -> one,
          followers -> follower, an explicit node list minus one node (a
          package that only takes "all", like power-fail-all, is swapped for
          its general form with the same ops, power-fail);
3. idle   cut idle time: the lead-in to 2 s, gaps with no fault active to
          1 s (overlapping faults keep their relative timing), the run to
          end soon after the last op;
4. hold   hold an episode's fault half as long, else three quarters as
          long (not below 1 s), closing in on the shortest hold that works.

Each candidate runs (on a fresh cluster) `attempts` times and reproduces if
any attempt shows the anomaly. Passes repeat until none makes progress or
`max_runs` runs are used. Everything goes in
`<store>/shrink/<name>/<stamp>/`: shrink.jsonl (every candidate: change,
size, runs, outcome), schedule.json (the smallest reproducing schedule so
far, kept current so an interrupted search keeps its best) and shrunk.json
(sizes before and after, the evidence runs, the command that replays it: `kchaos repro EVIDENCE_RUN`).
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

import kchaos.nemesis as registry
from kchaos.checkers.verdict.observed import anomaly_kinds
from kchaos.core.config import ConfigError, TestConfig
from kchaos.core.store import check_store, stamped_dir
from kchaos.harness.scenarios.repro import Runner, attempt, recorded_config
from kchaos.harness.terminal import heading, make_console

LEAD_IN_S, GAP_S, MIN_HOLD_S, TAIL_S = 2.0, 1.0, 1.0, 2.0
NARROWER = {"all": "majority", "majority": "minority", "minority": "one", "followers": "follower"}


@dataclass(frozen=True)
class Candidate:
    """A schedule (episodes, each a tuple of schedule.json entries) and the run's time limit."""

    episodes: tuple[tuple[dict[str, Any], ...], ...]
    time_limit: float

    def schedule(self) -> list[dict[str, Any]]:
        """The entries in time order, as schedule.json holds them."""
        return sorted((e for ep in self.episodes for e in ep), key=lambda e: e["at"])

    def key(self) -> str:
        """Identity of the candidate, for not running the same one twice."""
        return json.dumps([self.schedule(), self.time_limit], sort_keys=True)


def episodes(schedule: list[dict[str, Any]]) -> tuple[tuple[dict[str, Any], ...], ...]:
    """Pair each fault with the next op of the same nemesis that mends it; anything else stands alone."""
    out: list[list[dict[str, Any]]] = []
    open_: dict[str, list[dict[str, Any]]] = {}
    for e in sorted(schedule, key=lambda e: e["at"]):
        pkg, _ = registry.split(e["nemesis"])
        if e["op"]["f"] == pkg.fs[0] and len(pkg.fs) > 1:
            ep = [e]
            out.append(ep)
            open_[e["nemesis"]] = ep
        elif len(pkg.fs) > 1 and e["nemesis"] in open_:
            open_.pop(e["nemesis"]).append(e)
        else:
            out.append([e])
    return tuple(tuple(ep) for ep in out)


# How broad a target kind is, to prefer "one" over a "minority" of the same size.
BREADTH = {"all": 3, "majority": 2, "minority": 1, "followers": 1}


def size(c: Candidate, cfg: TestConfig) -> tuple[int, int, int, float, float]:
    """(episodes, nodes aimed at, breadth of the targets, seconds of fault, time limit): smaller is simpler,
    compared in that order."""
    n, rf = cfg.cluster.nodes, cfg.topic.replication_factor
    width = {"one": 1, "leader": 1, "follower": 1, "controller": 1, "followers": rf - 1,
             "minority": max((n - 1) // 2, 1), "majority": n // 2 + 1, "all": n + cfg.cluster.controllers}
    nodes = breadth = 0
    for ep in c.episodes:
        op = ep[0]["op"]
        pkg, target = registry.split(ep[0]["nemesis"])
        kind = (op.get("target") or target or (pkg.targets[0] if pkg.targets else "all")).partition(":")[0]
        nodes += len(op["nodes"]) if "nodes" in op else width.get(kind, 1)
        breadth += 0 if "nodes" in op else BREADTH.get(kind, 0)
    held = sum(ep[-1]["at"] - ep[0]["at"] for ep in c.episodes)
    return len(c.episodes), nodes, breadth, round(held, 3), c.time_limit


def _with(c: Candidate, i: int, ep: tuple[dict[str, Any], ...]) -> Candidate:
    return replace(c, episodes=c.episodes[:i] + (ep,) + c.episodes[i + 1:])


def drops(c: Candidate) -> Iterator[tuple[str, Candidate]]:
    """Candidates with a chunk of episodes removed: halves, quarters, ..., single episodes."""
    n = len(c.episodes)
    chunk = n // 2
    while chunk >= 1:
        for start in range(0, n, chunk):
            kept = c.episodes[:start] + c.episodes[start + chunk:]
            if kept:
                gone = ", ".join(_describe(ep) for ep in c.episodes[start:start + chunk])
                yield f"drop {gone}", replace(c, episodes=kept)
        chunk //= 2


def narrows(c: Candidate) -> Iterator[tuple[str, Candidate]]:
    """Candidates with one episode aimed at fewer nodes."""
    for i, ep in enumerate(c.episodes):
        first = ep[0]
        op = first["op"]
        if "nodes" in op and len(op["nodes"]) > 1:
            for node in op["nodes"]:
                fewer = [x for x in op["nodes"] if x != node]
                yield f"{_describe(ep)} without {node}", _with(c, i, _retarget(ep, first["nemesis"],
                                                                               {**op, "nodes": fewer}))
            continue
        pkg, target = registry.split(first["nemesis"])
        kind = op.get("target") or target or (pkg.targets[0] if pkg.targets else None)
        to = NARROWER.get(kind or "")
        if to is None:
            continue
        spec = first["nemesis"] if to in pkg.targets else _general(pkg, to)
        if spec is None:
            continue
        new_op = {**op, "target": to}
        if to == "follower" and "partition" not in new_op:
            new_op["partition"] = 0
        yield f"{_describe(ep)} aimed at {to}", _with(c, i, _retarget(ep, spec, new_op))


def _general(pkg: registry.Package, kind: str) -> str | None:
    """A package with the same ops as `pkg` that takes `kind` (power-fail-all -> power-fail)."""
    return next((p.name for p in registry.PACKAGES.values() if p.fs == pkg.fs and kind in p.targets), None)


def _retarget(ep: tuple[dict[str, Any], ...], spec: str, op: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return ({**ep[0], "nemesis": spec, "op": op}, *({**e, "nemesis": spec} for e in ep[1:]))


def idles(c: Candidate) -> Iterator[tuple[str, Candidate]]:
    """The candidate with idle time cut (lead-in, gaps between faults, the tail after the last op)."""
    shifted: list[list[dict[str, Any]]] = [list(ep) for ep in c.episodes]
    spans = sorted(((ep[0]["at"], ep[-1]["at"]), i) for i, ep in enumerate(c.episodes))
    offset, busy_until, moves = 0.0, None, {}
    for (begin, end), i in spans:
        if busy_until is None:
            offset = max(begin - LEAD_IN_S, 0.0)
        elif begin > busy_until + GAP_S:
            offset += begin - (busy_until + GAP_S)
        busy_until = end if busy_until is None else max(busy_until, end)
        moves[i] = offset
    for i, ep in enumerate(shifted):
        shifted[i] = [{**e, "at": round(e["at"] - moves[i], 3)} for e in ep]
    moved = replace(c, episodes=tuple(tuple(ep) for ep in shifted))
    last = max(e["at"] for e in moved.schedule())
    limit = min(c.time_limit, round(last + TAIL_S + 1, 1))
    cut = replace(moved, time_limit=limit)
    if cut.key() != c.key():
        yield f"idle time cut: faults from {min(e['at'] for e in cut.schedule()):g} s, run {limit:g} s", cut


def holds(c: Candidate) -> Iterator[tuple[str, Candidate]]:
    """Candidates with one episode's fault held shorter: half as long, else three quarters (to 0.5 s).

    Tried from the current best each time, so a fault's hold closes in on the
    shortest that still reproduces (from 15 s: 7.5, else 11; from 11: 5.5, else 8).
    The ops after the mend keep their times.
    """
    for i, ep in enumerate(c.episodes):
        if len(ep) < 2:
            continue
        hold = ep[-1]["at"] - ep[0]["at"]
        for share in (0.5, 0.75):
            new = max(round(hold * share * 2) / 2, MIN_HOLD_S)
            if new < hold - 0.25:
                end = {**ep[-1], "at": round(ep[0]["at"] + new, 3)}
                yield f"{_describe(ep)} held {new:g} s instead of {hold:g} s", _with(c, i, (*ep[:-1], end))


PASSES: tuple[tuple[str, Callable[[Candidate], Iterator[tuple[str, Candidate]]]], ...] = (
    ("drop", drops), ("narrow", narrows), ("idle", idles), ("hold", holds))


def _describe(ep: tuple[dict[str, Any], ...]) -> str:
    op = ep[0]["op"]
    aim = ",".join(op["nodes"]) if "nodes" in op else op.get("target", "")
    part = f":{op['partition']}" if "partition" in op else ""
    return f"{ep[0]['nemesis']} {op['f']}{' ' + aim + part if aim else ''}@{ep[0]['at']:g}s"


def search(start: Candidate, cfg: TestConfig, try_: Callable[[str, str, Candidate], bool],
           budget: Callable[[], bool]) -> Candidate:
    """The smallest candidate `try_(pass, change, candidate)` says reproduces, found greedily from `start`.

    `budget()` says whether another candidate may still be tried.
    """
    best, seen = start, {start.key()}
    progress = True
    while progress and budget():
        progress = False
        for name, make in PASSES:
            improved = True
            while improved and budget():
                improved = False
                for change, cand in make(best):
                    if cand.key() in seen or size(cand, cfg) >= size(best, cfg) or not cand.schedule():
                        continue
                    seen.add(cand.key())
                    if not budget():
                        break
                    if try_(name, change, cand):
                        best, improved, progress = cand, True, True
                        break
    return best


def shrink(run: Path, store: Path, *, anomaly: str | None = None, max_runs: int = 20, attempts: int = 1,
           spark_master: str = "local[*]", console: Console | None = None, argv: list[str] | None = None,
           runner: Runner | None = None) -> dict[str, Any]:
    """Shrink `run`'s fault schedule; return (and write to shrunk.json) the smallest reproducing one found."""
    from kchaos.harness.build import preflight
    from kchaos.harness.runner import run_test

    console = console or make_console()
    cfg, results = recorded_config(run)
    kinds = anomaly_kinds(results)
    anomaly = anomaly or (kinds[0] if kinds else None)
    if anomaly is None:
        raise ConfigError(f"{run}: the run shows no anomaly, so there is nothing to reproduce")
    if anomaly not in kinds:
        raise ConfigError(f"--anomaly {anomaly}: {run} shows {', '.join(kinds) or 'no anomaly'}")
    schedule_file = cfg.nemesis.schedule_file
    assert schedule_file is not None  # recorded_config replays the run's own schedule.json
    original = json.loads(Path(schedule_file).read_text())
    if not original:
        raise ConfigError(f"{run}: its schedule.json has no faults to shrink")
    cfg = preflight(cfg.with_(spark_master=spark_master, store=str(store)))
    sdir = stamped_dir(check_store(str(store)) / "shrink" / cfg.name)
    (sdir / "candidates").mkdir()
    start = Candidate(episodes(original), cfg.time_limit)
    state: dict[str, Any] = {"original": str(Path(run).resolve()), "anomaly": anomaly, "seed": cfg.seed,
                             "original_size": _size_json(start, cfg), "tried": 0, "runs": 0}
    best_runs = [str(Path(run).resolve())]
    console.print(f"[bold]shrink[/] {run}: keep {anomaly}; {len(start.episodes)} fault episodes, "
                  f"{cfg.time_limit:g} s run; at most {max_runs} runs → {sdir}")

    def try_(name: str, change: str, cand: Candidate) -> bool:
        nonlocal best_runs
        state["tried"] += 1
        n = state["tried"]
        path = sdir / "candidates" / f"{n:03d}.json"
        path.write_text("[\n" + ",\n".join(json.dumps(e) for e in cand.schedule()) + "\n]\n")
        ccfg = cfg.with_(store=str(sdir / "runs"), time_limit=cand.time_limit,
                         nemesis=replace(cfg.nemesis, schedule_file=str(path), names=()))
        outs: list[dict[str, Any]] = []
        try:
            ccfg = preflight(ccfg)
        except ConfigError as e:  # a transformation made an unrunnable schedule: a bug here, not the user's
            outs.append({"run": None, "error": f"ConfigError: {e}", "reproduced": False, "anomalies": [], "counts": {}})
        heading(console, f"shrink candidate {n} ({name}): {change}")
        for k in range(attempts if not outs else 0):
            if state["runs"] >= max_runs:
                break
            state["runs"] += 1
            outs.append(attempt(ccfg, runner or run_test, console, argv or [], f"candidate {n}.{k + 1}", [anomaly]))
            if outs[-1]["reproduced"]:
                break
        ok = any(o["reproduced"] for o in outs)
        line = {"n": n, "pass": name, "change": change, "size": _size_json(cand, cfg), "schedule": str(path),
                "reproduced": ok, "runs": outs}
        with open(sdir / "shrink.jsonl", "a") as fh:
            fh.write(json.dumps(line) + "\n")
        console.print(f"candidate {n}: {'[green]reproduced[/]' if ok else '[yellow]did not reproduce[/]'} {anomaly}")
        if ok:
            best_runs = [o["run"] for o in outs if o["reproduced"]]
            (sdir / "schedule.json").write_text(path.read_text())
            _write_result(sdir, state, cand, cfg, best_runs, shrunk=True)
        return ok

    best = search(start, cfg, try_, lambda: state["runs"] < max_runs)
    out = _write_result(sdir, state, best, cfg, best_runs, shrunk=best is not start)
    if best is start:
        (sdir / "schedule.json").write_text(Path(schedule_file).read_text())
        console.print("[yellow]no smaller schedule reproduced the anomaly; the original is the smallest known[/]")
    return out


def _size_json(c: Candidate, cfg: TestConfig) -> dict[str, float]:
    return dict(zip(("episodes", "nodes", "breadth", "fault_s", "time_limit"), size(c, cfg)))


def _write_result(sdir: Path, state: dict[str, Any], best: Candidate, cfg: TestConfig, runs: list[str],
                  shrunk: bool) -> dict[str, Any]:
    out = {**state, "smallest": {"size": _size_json(best, cfg), "schedule": best.schedule(), "shrunk": shrunk,
                                 "evidence": runs},
           # the evidence run's test.json holds the whole configuration, seed and this schedule
           "replay": f"kchaos repro {shlex.quote(runs[0])}"}
    (sdir / "shrunk.json").write_text(json.dumps(out, indent=2) + "\n")
    out["dir"] = str(sdir)
    return out
