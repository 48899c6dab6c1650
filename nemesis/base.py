"""What every nemesis package shares: the package record, the skip signal, the schedule type,
and the generic targeted nemesis that most faults are made of."""
from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.protocols import FaultSkipped, Nemesis, NodeControl
from kchaos.nemesis.targets import Target, coordinator_keys, fault_op, resolve_recorded

__all__ = ["FaultSkipped", "ScheduledOp", "Package", "periodic", "targeted", "TargetedNemesis", "NodeFault",
           "outlive_lag", "outlive_session", "last_json", "while_refused"]


@dataclass(frozen=True)
class ScheduledOp:
    """One fault operation at `at` seconds after the workload started."""

    at: float
    nemesis: str
    op: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as saved in schedule.json."""
        return {"at": round(self.at, 3), "nemesis": self.nemesis, "op": self.op}


Schedule = Callable[[random.Random, TestConfig, str, str | None], list[ScheduledOp]]


@dataclass(frozen=True)
class Package:
    """A nemesis bundled with its schedule and the colours its faults get in plots (Jepsen's packages).

    `schedule(rng, cfg, spec, target)` draws the package's ops for the nemesis
    named `spec` (e.g. "kill:majority") aimed at `target` (None: the default).
    `targets` lists the target kinds it accepts, the default first (empty: it
    takes none); `fs` the op names a schedule may hold; `needs_lazyfs` that
    the nodes' log directories must be on the lazy filesystem.
    """

    name: str
    make: Callable[..., Nemesis]  # (cluster, cfg), or (cluster, cfg, workload) with needs_workload
    schedule: Schedule
    colors: dict[str, str] = field(default_factory=dict)
    targets: tuple[str, ...] = ()
    fs: tuple[str, ...] = ()
    needs_lazyfs: bool = False
    # `make` takes the workload as a third argument (a nemesis acting on the clients, `crash-client`).
    needs_workload: bool = False
    # fs[1] mends what fs[0] breaks; False when the later ops are more steps of the same change (upgrade).
    mends: bool = True
    # dedicated KRaft controllers the fault needs (--controllers): cutting the quorum apart from the brokers.
    needs_controllers: int = 0
    # the nodes' Kafka must run under libfaketime (preflight then sets cluster.faketime; a host needs Debian's
    # faketime package).
    needs_faketime: bool = False
    # Healed before the packages without it (a network fault): a broker restarted while it is cut off from the
    # controllers cannot catch up with the metadata log, and so neither serves nor listens, until the cut heals.
    heal_first: bool = False
    # Why a schedule's op of this package is malformed (its own fields, beyond f and the target), or None: checked
    # when the schedule loads, so a bad value is a one-line error before anything runs.
    check_op: Callable[[dict[str, Any]], str | None] | None = None


def periodic(rng: random.Random, cfg: TestConfig, name: str,
             fault: Callable[[random.Random], dict[str, Any]], heal: dict[str, Any] | None,
             duration: float | None = None) -> list[ScheduledOp]:
    """Fault, then `heal` after `duration` (default `restart_delay`), repeated while both fit in the time limit.

    Faults start every `interval` (+/- jitter), but never before the previous
    one healed plus a second. The first fault comes after a random share of
    one interval, so several packages in one run do not fire in lockstep.
    """
    n = cfg.nemesis
    hold = n.restart_delay if duration is None else duration
    ops: list[ScheduledOp] = []
    t = n.interval * rng.uniform(0.5, 1 + n.jitter)
    while t + (hold if heal is not None else 0) < cfg.time_limit:
        ops.append(ScheduledOp(t, name, fault(rng)))
        healed = t
        if heal is not None:
            healed = t + hold
            ops.append(ScheduledOp(healed, name, dict(heal)))
        t = max(t + n.interval * (1 + rng.uniform(-n.jitter, n.jitter)), healed + 1.0)
    return ops


def last_json(out: str) -> dict[str, Any]:
    """The JSON object on the last line of a fault-ctl answer ({} when there is none)."""
    try:
        stats = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {}
    return stats if isinstance(stats, dict) else {}


def outlive_lag(cfg: TestConfig) -> float:
    """A fault duration long enough for replica.lag.time.max.ms to expire: followers leave the ISR."""
    return max(cfg.nemesis.restart_delay, cfg.cluster.replica_lag_time_max_ms / 1000 + 5)


def outlive_session(cfg: TestConfig) -> float:
    """A fault duration past broker.session.timeout.ms: the controller fences the broker."""
    return max(cfg.nemesis.restart_delay, cfg.cluster.broker_session_timeout_ms / 1000 + 4)


class NodeFault(Protocol):
    """What a targeted fault does: break some nodes, mend them, mend everything."""

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Apply the fault to `nodes`; return what to record. A "nodes" entry names the nodes
        that will need mending, when they are not simply `nodes`."""

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Undo the fault on `nodes`; return what to record."""

    def heal(self) -> None:
        """Undo the fault on every node, whatever state it is in. Idempotent."""


class TargetedNemesis:
    """A nemesis made of a NodeFault: `start_f` ops break the resolved targets, `stop_f` ops mend them.

    Faults stack: a second `start_f` while one is active adds its nodes, and
    `stop_f` mends all of them.
    """

    def __init__(self, name: str, fault: NodeFault, cluster: NodeControl, cfg: TestConfig,
                 start_f: str, stop_f: str, default_target: str):
        self.name, self.fault, self.cluster, self.default_target = name, fault, cluster, default_target
        self.topic = cfg.topic.name
        self.cfg = cfg
        self.start_f, self.stop_f = start_f, stop_f
        self.active: set[str] = set()

    def setup(self, cluster: NodeControl, history: History) -> None:
        """Nothing to prepare."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """Apply `start_f` to the op's target, resolved now (after the driver has honoured the op's
        `await_isr` precondition, if any), or undo everything on `stop_f`."""
        if op["f"] == self.start_f:
            op = {"target": self.default_target, **op}
            targets, record = resolve_recorded(self.cluster, self.topic, op, coordinator_keys(self.cfg))
            try:
                out = {"nodes": targets, **self.fault.begin(targets, op)}
            except Exception:
                self.active.update(targets)  # half-applied: the mend must still visit every target
                raise
            self.active.update(out["nodes"])
            return {"targets": targets, **record, **out}
        if op["f"] == self.stop_f:
            nodes = sorted(self.active)
            self.active.clear()
            return {"nodes": nodes, **(self.fault.end(nodes) if nodes else {})}
        raise ValueError(f"{self.name} cannot {op['f']!r}")

    def teardown(self) -> None:
        """Undo the fault everywhere."""
        self.active.clear()
        self.fault.heal()


def targeted(name: str, make_fault: Callable[[NodeControl, TestConfig], NodeFault], *, start_f: str, stop_f: str,
             targets: tuple[str, ...], colors: dict[str, str],
             duration: Callable[[TestConfig], float] | None = None, needs_lazyfs: bool = False,
             needs_faketime: bool = False) -> Package:
    """A package of a NodeFault applied periodically to a target, mended after `duration(cfg)` seconds."""
    def make(cluster: NodeControl, cfg: TestConfig) -> Nemesis:
        return TargetedNemesis(name, make_fault(cluster, cfg), cluster, cfg, start_f, stop_f, targets[0])

    def schedule(rng: random.Random, cfg: TestConfig, spec: str, target: str | None) -> list[ScheduledOp]:
        t = Target.parse(target or targets[0])
        return periodic(rng, cfg, spec, lambda r: fault_op(start_f, t, r, cfg.topic.partitions),
                        {"f": stop_f}, duration(cfg) if duration else None)

    return Package(name, make, schedule, colors, targets, (start_f, stop_f), needs_lazyfs,
                   needs_faketime=needs_faketime)


def while_refused(call: Callable[[], str], because: str, within_s: float, every_s: float) -> tuple[str, int]:
    """`call()` (a tool run), again every `every_s` while it fails with a FaultSkipped saying `because` (a refusal
    that passes once the cluster has caught up: a restarted broker not registered yet, a controller still lagging),
    for up to `within_s`, as an operator tries again; its answer and how many times it was refused. Any other
    failure, or the last refusal, is raised."""
    deadline, refused = time.monotonic() + within_s, 0
    while True:
        try:
            return call(), refused
        except FaultSkipped as e:
            if because not in str(e) or time.monotonic() >= deadline:
                raise
            refused += 1
            time.sleep(every_s)
