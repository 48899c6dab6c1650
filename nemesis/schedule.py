"""Fault schedules: drawn up front from the seed, saved as schedule.json, and replayed from such a file.

A schedule is a JSON list of `{"at": seconds, "nemesis": spec, "op": {...}}`,
times relative to the start of the workload. Each nemesis spec draws from its
own generator seeded by (seed, spec), so adding a nemesis to a run does not
move the faults of the others. `mix` draws one schedule whose entries name
the concrete specs it picked.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, TypeGuard

import kchaos.nemesis as registry
from kchaos.core.config import ConfigError, TestConfig
from kchaos.nemesis import mix
from kchaos.nemesis.base import ScheduledOp
from kchaos.nemesis.targets import PARTITIONED, Target


def make_schedule(cfg: TestConfig) -> list[ScheduledOp]:
    """The run's schedule: loaded from `nemesis.schedule_file` if set, else drawn from the seed."""
    if cfg.nemesis.schedule_file:
        return load_schedule(Path(cfg.nemesis.schedule_file), cfg)
    if mix.NAME in cfg.nemesis.names:
        return mix.schedule(cfg)
    ops: list[ScheduledOp] = []
    for spec in cfg.nemesis.names:
        if spec != "none":
            pkg, target = registry.split(spec)
            ops += pkg.schedule(random.Random(f"{cfg.seed}:{spec}"), cfg, spec, target)
    return sorted(ops, key=lambda s: s.at)


def specs_in(names: tuple[str, ...], schedule: list[ScheduledOp]) -> tuple[str, ...]:
    """The concrete specs a run needs a nemesis for: its names (less `none` and `mix`), then every spec
    its schedule uses, each once."""
    named = [s for s in names if s not in ("none", mix.NAME)]
    return tuple(dict.fromkeys([*named, *(op.nemesis for op in schedule)]))


def kills_closer_than(ops: list[ScheduledOp], seconds: float) -> float | None:
    """The shortest gap between two SIGKILLs of `ops` when it is under `seconds`, else None. A SIGKILLed broker
    keeps its partitions, and the controller refuses its restart's registration, until its session expires:
    kills closer than broker.session.timeout.ms can leave partitions leaderless from the first kill to the heal
    (docs/nemeses.md, "Availability under repeated kills")."""
    kills = sorted(o.at for o in ops if o.op.get("f") == "kill")
    gap = min((b - a for a, b in zip(kills, kills[1:])), default=None)
    return gap if gap is not None and gap < seconds else None


def save_schedule(ops: list[ScheduledOp], path: Path) -> None:
    """Write `ops` as schedule.json (one op per line, so diffs and hand edits stay readable)."""
    path.write_text("[\n" + ",\n".join(json.dumps(s.to_dict()) for s in ops) + "\n]\n")


def schedule_names(path: Path) -> tuple[str, ...]:
    """The nemesis specs a schedule file uses, in order of first use; ConfigError if it is unreadable."""
    names: list[str] = []
    for i, entry in enumerate(_entries(path)):
        spec = entry.get("nemesis") if isinstance(entry, dict) else None
        if not isinstance(spec, str):
            raise ConfigError(f"schedule {path}: entry {i}: needs a \"nemesis\" name")
        if spec not in names:
            names.append(spec)
    return tuple(names)


def _entries(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"schedule {path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"schedule {path}: not JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(data, list):
        raise ConfigError(f"schedule {path}: must be a JSON list of {{at, nemesis, op}} entries")
    return data


def load_schedule(path: Path, cfg: TestConfig) -> list[ScheduledOp]:
    """Read and check a schedule file against `cfg`; ConfigError naming the entry that is wrong."""
    ops = []
    for i, e in enumerate(_entries(path)):
        where = f"schedule {path}: entry {i}"
        if not isinstance(e, dict) or set(e) - {"at", "nemesis", "op"} or not {"at", "nemesis", "op"} <= set(e):
            raise ConfigError(f"{where}: must be an object with exactly at, nemesis and op")
        at, spec, op = e["at"], e["nemesis"], e["op"]
        if not isinstance(at, (int, float)) or isinstance(at, bool) or not 0 <= at < cfg.time_limit:
            raise ConfigError(f"{where}: at={at!r} must be a number of seconds in [0, --time-limit {cfg.time_limit:g})")
        try:
            pkg, _ = registry.split(spec)
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
        if not isinstance(op, dict) or op.get("f") not in pkg.fs:
            raise ConfigError(f"{where}: op must be an object whose f is one of {', '.join(pkg.fs)}")
        _check_target(where, pkg, op, cfg)
        if pkg.check_op is not None and (why := pkg.check_op(op)):
            raise ConfigError(f"{where}: {why}")
        ops.append(ScheduledOp(float(at), spec, op))
    return sorted(ops, key=lambda s: s.at)


def _check_target(where: str, pkg: registry.Package, op: dict[str, Any], cfg: TestConfig) -> None:
    if "target" in op:
        try:
            kind = Target.parse(str(op["target"])).kind
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
        if kind not in pkg.targets:
            raise ConfigError(f"{where}: {pkg.name} cannot aim at {kind!r}; it takes {', '.join(pkg.targets)}")
        if kind in PARTITIONED and not _partition_ok(op, cfg):
            raise ConfigError(f"{where}: target {kind} needs a partition in 0..{cfg.topic.partitions - 1}")
    nodes = op.get("nodes", ["n1"])
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) and n for n in nodes):
        raise ConfigError(f"{where}: nodes must be a non-empty list of node names like [\"n1\"]")
    if "await_isr" in op or "await_s" in op:
        _check_await(where, pkg, op, cfg)
    if "pick" in op and not _is_int(op["pick"]):
        raise ConfigError(f"{where}: pick must be an integer")


def _check_await(where: str, pkg: registry.Package, op: dict[str, Any], cfg: TestConfig) -> None:
    n, wait = op.get("await_isr"), op.get("await_s", 1)
    if not pkg.targets:
        raise ConfigError(f"{where}: {pkg.name} has no target to hold, so it takes no await_isr")
    if op.get("f") != pkg.fs[0]:
        raise ConfigError(f"{where}: await_isr holds a fault, so only a {pkg.fs[0]} op may carry it")
    if not _is_int(n) or not 1 <= n <= cfg.topic.replication_factor:
        raise ConfigError(f"{where}: await_isr must be an ISR size in 1..{cfg.topic.replication_factor}")
    if not isinstance(wait, (int, float)) or isinstance(wait, bool) or wait <= 0:
        raise ConfigError(f"{where}: await_s must be a positive number of seconds")
    if not _partition_ok(op, cfg):
        raise ConfigError(f"{where}: await_isr needs a partition in 0..{cfg.topic.partitions - 1}")


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _partition_ok(op: dict[str, Any], cfg: TestConfig) -> bool:
    p = op.get("partition", 0)
    return _is_int(p) and 0 <= p < cfg.topic.partitions
