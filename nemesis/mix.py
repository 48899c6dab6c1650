"""The `mix` nemesis: one schedule of faults drawn at random from named families, overlapping.

Like Jepsen's combined nemesis. Every `--interval` (+/- jitter) a fault
starts: a family drawn uniformly among the named ones that have a package
free, then a package of it, a target kind the package takes and a partition
for leader/follower targets, and a hold between the restart delay and 1.5
times the longest Kafka timeout a fault must outlive (`outlive_lag`,
`outlive_session`), so some faults are blips and some shrink ISRs and fence
brokers. Holds longer than the interval make faults overlap.

Every entry names its concrete spec (`power-fail:leader:0`), so the saved
schedule.json replays, and shrinks, as any other. The mix never starts a
package while its previous fault is active (specs of one package share
state, such as a network fault's iptables tag), and never has two page-cache
faults active at once. It leaves out faults whose losses lie outside Kafka's
promise or that only stall the run: power failures of more than one node,
other faults aimed at every node (except the splits and `flaky`, which are
aimed at all by nature), and `rolling-restart`, which waits for a full ISR
that overlapping faults deny it and would hold up the schedule.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kchaos.core.config import ConfigError, TestConfig
from kchaos.nemesis import clock, disk, election, network, powerfail, process, reassign, slow, wipe
from kchaos.nemesis.base import Package, ScheduledOp, outlive_lag, outlive_session
from kchaos.nemesis.targets import NODE_ROLES, PARTITIONED, Target, fault_op

NAME = "mix"
FAMILIES: dict[str, tuple[Package, ...]] = {
    "process": process.PACKAGES,
    "network": network.PACKAGES,
    "page-cache": powerfail.PACKAGES,
    "slow": slow.PACKAGES,
    "disk": disk.PACKAGES,
    "clock": clock.PACKAGES,
    "operator": election.PACKAGES,
    "membership": (*wipe.PACKAGES, *reassign.PACKAGES),
}
# Families whose faults must not overlap each other: two power failures at once are a correlated loss.
EXCLUSIVE = ("page-cache",)
SINGLE_NODE = ("one", "leader", "follower", "controller")
# Families whose faults take a node's data: aimed at one node at a time, so that the rest keep what was committed.
LOSES_DATA = ("page-cache", "membership")
LEFT_OUT = {"rolling-restart": "waits for a full ISR that overlapping faults deny it, stalling the schedule"}
# Packages with one op and no target: how the mix draws that op.
ONE_SHOT: dict[str, Callable[[random.Random, int], dict[str, Any]]] = {
    "elect-unclean": lambda rng, partitions: {"f": "elect-unclean", "partition": rng.randrange(partitions)},
}
HOLD_SPAN = 1.5  # longest hold, as a multiple of the longest timeout a fault must outlive
END_MARGIN_S = 0.5  # a mend lands at least this long before the time limit


@dataclass(frozen=True)
class Choice:
    """A package the mix may draw, with the family it belongs to and the target kinds it may aim at."""

    family: str
    package: Package
    kinds: tuple[str, ...]  # empty: a one-shot package without targets


def kinds_for(family: str, pkg: Package) -> tuple[str, ...] | None:
    """The target kinds the mix may aim `pkg` at (() for a one-shot package); None if it leaves `pkg` out."""
    if pkg.name in LEFT_OUT:
        return None
    if not pkg.targets:
        return () if pkg.name in ONE_SHOT and len(pkg.fs) == 1 else None
    if len(pkg.fs) < 2:  # a break and its mend (reassign adds a third op, which the mix never draws)
        return None
    # Not the coordinators: a run has their keys only under some workloads and modes.
    kinds = tuple(k for k in pkg.targets if (k != "all" or pkg.targets[0] == "all") and k not in NODE_ROLES)
    if family in LOSES_DATA:
        kinds = tuple(k for k in kinds if k in SINGLE_NODE)
    return kinds or None


def choices(families: tuple[str, ...]) -> tuple[Choice, ...]:
    """Every package of `families` the mix may draw, in family then package order."""
    out = []
    for fam in families:
        for pkg in FAMILIES[fam]:
            kinds = kinds_for(fam, pkg)
            if kinds is not None:
                out.append(Choice(fam, pkg, kinds))
    return tuple(out)


def check(cfg: TestConfig) -> None:
    """Raise ConfigError unless `cfg` is a runnable mix: `mix` alone, known families, each named once,
    lazyfs storage unless `--storage plain` rules out every fault that needs it."""
    n = cfg.nemesis
    if n.names != (NAME,):
        raise ConfigError("--nemesis mix draws every fault itself; drop the other names "
                          "(choose what it draws with --mix-families)")
    fams = n.mix_families
    if not fams:
        raise ConfigError(f"--mix-families names no family; families: {', '.join(FAMILIES)}")
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown:
        raise ConfigError(f"unknown --mix-families {', '.join(map(repr, unknown))}; families: {', '.join(FAMILIES)}")
    twice = sorted({f for f in fams if fams.count(f) > 1})
    if twice:
        raise ConfigError(f"--mix-families names {', '.join(twice)} more than once")
    lazy = [c.package.name for c in choices(fams) if c.package.needs_lazyfs]
    if lazy and cfg.cluster.storage == "plain":
        raise ConfigError(f"--mix-families {','.join(fams)} may draw {', '.join(lazy)}, which need --storage lazyfs "
                          f"(or auto), not plain; or leave {', '.join(lazy_families(fams))} out")


def lazy_families(families: tuple[str, ...]) -> list[str]:
    """The families of `families` that may draw a fault that needs lazyfs."""
    return [f for f in families if f in FAMILIES and any(c.package.needs_lazyfs for c in choices((f,)))]


def needs_lazyfs(families: tuple[str, ...]) -> bool:
    """Whether the mix of `families` may draw a fault that needs lazyfs (unknown families are ignored)."""
    return any(c.package.needs_lazyfs for c in choices(tuple(f for f in families if f in FAMILIES)))


def needs_faketime(families: tuple[str, ...]) -> bool:
    """Whether the mix of `families` may draw a clock fault (unknown families are ignored)."""
    return any(c.package.needs_faketime for c in choices(tuple(f for f in families if f in FAMILIES)))


def spec_of(pkg: Package, target: Target | None) -> str:
    """The concrete spec an entry names: `kill:one`, `power-fail:leader:0`, `elect-unclean`."""
    return pkg.name if target is None else f"{pkg.name}:{target}"


def schedule(cfg: TestConfig) -> list[ScheduledOp]:
    """The mix's schedule for `cfg` (checked with `check` first), drawn from (seed, "mix") alone."""
    check(cfg)
    rng = random.Random(f"{cfg.seed}:{NAME}")
    n, limit, parts = cfg.nemesis, cfg.time_limit, cfg.topic.partitions
    shortest = max(1.0, n.restart_delay)
    longest = max(shortest, HOLD_SPAN * max(outlive_lag(cfg), outlive_session(cfg)))
    # Faults this cluster's shape cannot take are not drawn (the quorum cuts without dedicated controllers).
    pool = tuple(c for c in choices(n.mix_families) if c.package.needs_controllers <= cfg.cluster.controllers)
    free_at: dict[str, float] = {}  # package or exclusive family -> when it may start again
    ops: list[ScheduledOp] = []
    t = n.interval * rng.uniform(0.5, 1 + n.jitter)
    while t < limit - END_MARGIN_S:
        ready = [c for c in pool if free_at.get(c.package.name, 0.0) <= t
                 and (c.family not in EXCLUSIVE or free_at.get(c.family, 0.0) <= t)]
        fams = sorted({c.family for c in ready}, key=list(n.mix_families).index)
        if fams:
            fam = rng.choice(fams)
            c = rng.choice([x for x in ready if x.family == fam])
            end = _draw(rng, c, t, shortest, longest, limit, parts, ops)
            if end is not None:
                free_at[c.package.name] = end + 1.0
                if c.family in EXCLUSIVE:
                    free_at[c.family] = end + 1.0
        t += n.interval * (1 + rng.uniform(-n.jitter, n.jitter))
    return sorted(ops, key=lambda s: s.at)


def _draw(rng: random.Random, c: Choice, t: float, shortest: float, longest: float, limit: float, parts: int,
          ops: list[ScheduledOp]) -> float | None:
    """Append `c`'s fault at `t` (and its mend) to `ops`; return when it ends, None if it no longer fits."""
    if not c.kinds:
        ops.append(ScheduledOp(t, spec_of(c.package, None), ONE_SHOT[c.package.name](rng, parts)))
        return t
    kind = rng.choice(c.kinds)
    target = Target(kind, rng.randrange(parts) if kind in PARTITIONED else None)
    end = min(t + rng.uniform(shortest, longest), limit - END_MARGIN_S)
    if end - t < shortest:
        return None
    spec = spec_of(c.package, target)
    start_f, stop_f = c.package.fs[:2]
    ops.append(ScheduledOp(t, spec, fault_op(start_f, target, rng, parts)))
    ops.append(ScheduledOp(end, spec, {"f": stop_f}))
    return end
