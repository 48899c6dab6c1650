"""Nemesis registry: one line per module of packages. `--nemesis a,b:target` names entries here."""
from __future__ import annotations

from nemesis import election, network, powerfail, process, slow
from nemesis.base import FaultSkipped, Package, ScheduledOp
from nemesis.targets import Target

PACKAGES: dict[str, Package] = {p.name: p for p in (
    *process.PACKAGES,
    *network.PACKAGES,
    *powerfail.PACKAGES,
    *slow.PACKAGES,
    *election.PACKAGES,
)}

# "none" runs the workload without faults.
NAMES = tuple(PACKAGES) + ("none",)


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
    if spec == "none":
        return
    _, target = split(spec)
    p = Target.parse(target).partition if target else None
    if partitions is not None and p is not None and p >= partitions:
        raise ValueError(f"nemesis {spec!r} aims at partition {p}, but the topic has {partitions} (0..{partitions - 1})")


def needs_lazyfs(specs: tuple[str, ...]) -> bool:
    """Whether any of these nemeses needs the nodes' log directories on lazyfs."""
    return any(split(s)[0].needs_lazyfs for s in specs if s != "none")


def powers_off_every_replica(specs: tuple[str, ...] | list[str]) -> bool:
    """Whether these faults cut the power of every node at once (power-fail-all, or power-fail aimed at all).

    Kafka's no-loss promise assumes an in-sync replica survives with its data;
    a correlated power loss takes every replica's unsynced writes, so loss
    there is outside the promise (unless the log is flushed: flush.messages=1).
    """
    for spec in specs:
        if spec == "none":
            continue
        pkg, target = split(spec)
        kind = pkg.targets[0] if target is None and pkg.targets else Target.parse(target).kind if target else None
        if pkg.name.startswith("power-fail") and kind == "all":
            return True
    return False


__all__ = ["PACKAGES", "NAMES", "Package", "ScheduledOp", "FaultSkipped", "split", "check_spec", "needs_lazyfs",
           "powers_off_every_replica"]
