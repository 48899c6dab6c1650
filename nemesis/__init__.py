"""Nemesis registry: one line per module of packages. `--nemesis a,b:target` names entries here.

`mix` is no package: it draws a schedule of other packages' faults (`kchaos.nemesis.mix`).
"""
from __future__ import annotations

from kchaos.core.faults import FaultKind
from kchaos.nemesis import (
    brokers,
    client,
    clock,
    controllers,
    corrupt,
    disk,
    election,
    mix,
    network,
    powerfail,
    process,
    reassign,
    slow,
    upgrade,
    wipe,
)
from kchaos.nemesis.base import FaultSkipped, Package, ScheduledOp
from kchaos.nemesis.targets import Target

PACKAGES: dict[str, Package] = {p.name: p for p in (
    *process.PACKAGES,
    *network.PACKAGES,
    *powerfail.PACKAGES,
    *disk.PACKAGES,
    *slow.PACKAGES,
    *clock.PACKAGES,
    *election.PACKAGES,
    *client.PACKAGES,
    *upgrade.PACKAGES,
    *corrupt.PACKAGES,
    *wipe.PACKAGES,
    *reassign.PACKAGES,
    *brokers.PACKAGES,
    *controllers.PACKAGES,
)}

# "none" runs the workload without faults; "mix" draws faults from families of packages.
NAMES = tuple(PACKAGES) + ("none", mix.NAME)


def split(spec: str) -> tuple[Package, str | None]:
    """The package and target of a nemesis spec like `kill:majority`; ValueError naming the problem."""
    name, _, target = spec.partition(":")
    if name not in PACKAGES:
        raise ValueError(f"unknown nemesis {name!r}; known: {', '.join(sorted(NAMES))}")
    pkg = PACKAGES[name]
    if target:
        if not pkg.targets:
            raise ValueError(f"nemesis {name!r} takes no target (got {spec!r})")
        if Target.parse(target).kind not in pkg.targets:
            raise ValueError(f"nemesis {name!r} cannot aim at {target!r}; it takes {', '.join(pkg.targets)}")
    return pkg, target or None


def check_spec(spec: str, partitions: int | None = None) -> None:
    """Raise ValueError unless `spec` names a nemesis (optionally `:target`) or is "none".

    With `partitions`, a target's partition must also be one of the topic's.
    """
    if spec in ("none", mix.NAME):
        return
    if spec.partition(":")[0] == mix.NAME:
        raise ValueError(f"nemesis {mix.NAME!r} takes no target (got {spec!r}); use --mix-families")
    _, target = split(spec)
    p = Target.parse(target).partition if target else None
    if partitions is not None and p is not None and p >= partitions:
        raise ValueError(f"nemesis {spec!r} aims at partition {p}, "
                         f"but the topic has {partitions} (0..{partitions - 1})")


def fault_kind(spec: str) -> FaultKind:
    """What the run's faults.json says of nemesis `spec`: its package's break op, mend op (None for a one-shot
    package) and colours. ValueError as `split` for an unknown name."""
    pkg, _ = split(spec)
    return FaultKind(spec, pkg.fs[0], pkg.fs[1] if len(pkg.fs) > 1 and pkg.mends else None, pkg.colors)


def needs_lazyfs(specs: tuple[str, ...], mix_families: tuple[str, ...] = ()) -> bool:
    """Whether any of these nemeses needs the nodes' log directories on lazyfs.

    For `mix`: whether it may draw such a fault from `mix_families`.
    """
    return any(mix.needs_lazyfs(mix_families) if s == mix.NAME else split(s)[0].needs_lazyfs
               for s in specs if s != "none")


def needs_faketime(specs: tuple[str, ...], mix_families: tuple[str, ...] = ()) -> bool:
    """Whether any of these nemeses moves the clock of the nodes' Kafka, which then must run under libfaketime.

    For `mix`: whether it may draw such a fault from `mix_families`.
    """
    return any(mix.needs_faketime(mix_families) if s == mix.NAME else split(s)[0].needs_faketime
               for s in specs if s != "none")


__all__ = ["PACKAGES", "NAMES", "Package", "ScheduledOp", "FaultSkipped", "split", "check_spec", "fault_kind",
           "needs_lazyfs", "needs_faketime"]
