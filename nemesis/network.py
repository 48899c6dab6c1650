"""Network partitions made with iptables inside the node containers.

A partition is a *grudge*, as in Jepsen: for every node, the addresses whose
packets it drops on arrival. Rules match other nodes' addresses only, so the
clients (which reach every node from the host) keep talking to an isolated
node; `partition-client` is the one fault that cuts clients off. Every rule
lives in the KCHAOS chain of the node's own network namespace; healing
flushes that chain, and removing the container removes it too.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kchaos.core.protocols import NodeControl
from kchaos.nemesis.base import Package, outlive_lag, outlive_session, targeted
from kchaos.nemesis.targets import NODE_ROLES

Grudge = dict[str, set[str]]  # node -> nodes (or addresses) whose packets it drops
GrudgeFn = Callable[[list[str], list[str], random.Random], Grudge]
FLAKY_LOSS = 0.2  # share of packets `flaky` drops
COLORS = {"start-partition": "#4e79a7", "stop-partition": "#a0cbe8"}


def isolate(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """Targets and the rest cannot reach each other (both directions)."""
    rest = set(everyone) - set(targets)
    return {n: (rest if n in targets else set(targets)) for n in everyone if rest}


def halves(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """A random split into two halves (the smaller first) that cannot reach each other."""
    order = rng.sample(everyone, len(everyone))
    a, b = set(order[: len(order) // 2]), set(order[len(order) // 2:])
    return {n: (b if n in a else a) for n in everyone if a and b}


def majorities_ring(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """Every node sees a majority (itself and its ring neighbours), and no two see the same one."""
    order = rng.sample(everyone, len(everyone))
    n, m = len(order), len(order) // 2 + 1
    grudge: Grudge = {}
    for i, node in enumerate(order):
        sees = {order[(i + k) % n] for k in range(-(m // 2), m - m // 2)}
        grudge[node] = set(everyone) - sees
    return {k: v for k, v in grudge.items() if v}


def bridge(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """Two halves that cannot reach each other, and one bridge node that reaches both."""
    order = rng.sample(everyone, len(everyone))
    mid = len(order) // 2
    a, b = set(order[:mid]), set(order[mid + 1:])
    return {n: (b if n in a else a) for n in a | b if a and b}


def lossy(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """Each target loses (a share of) the packets from every other node."""
    return {n: set(everyone) - {n} for n in targets if len(everyone) > 1}


def apart(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """No two nodes reach each other."""
    return {n: set(everyone) - {n} for n in everyone if len(everyone) > 1}


def oneway(targets: list[str], everyone: list[str], rng: random.Random) -> Grudge:
    """Packets from the targets to every other node are dropped; the other way passes."""
    return {n: set(targets) for n in everyone if n not in targets}


class NetFault:
    """Applies a grudge with `fault-ctl drop` (or `flaky`) on each aggrieved node; heals with `net-heal`.

    Rules carry the nemesis's name as a tag, so overlapping network faults mend independently.
    """

    def __init__(self, cluster: NodeControl, tag: str, grudge: GrudgeFn | None, *, clients: bool = False,
                 loss: float | None = None, quorum: bool = False):
        self.cluster, self.tag, self.grudge, self.clients, self.loss = cluster, tag, grudge, clients, loss
        self.quorum = quorum  # the grudge is among the dedicated controllers only: brokers reach every node

    def _everyone(self) -> list[str]:
        if self.quorum:
            return sorted(set(self.cluster.controllers) - set(self.cluster.nodes))
        return sorted(set(self.cluster.nodes) | set(self.cluster.controllers))

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Install the drop rules for the op's grudge; record the grudge by node name (or address)."""
        everyone = self._everyone()
        if self.clients:
            drops = {n: [self.cluster.client_address()] for n in nodes}
        else:
            grudge = (self.grudge or isolate)(nodes, everyone, random.Random(op.get("pick", 0)))
            drops = {n: sorted(g) for n, g in grudge.items()}
        for node, srcs in sorted(drops.items()):
            addrs = [self.cluster.address(s) if s in everyone else s for s in srcs]  # a node, or the clients' address
            args = ["drop", self.tag, *addrs] if self.loss is None else ["flaky", self.tag, str(self.loss), *addrs]
            self.cluster.fault_ctl(node, *args)
        out: dict[str, Any] = {"nodes": sorted(drops), "grudge": drops}
        if self.loss is not None:
            out["loss"] = self.loss
        return out

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Remove this nemesis's drop rules on `nodes` (another nemesis's partition stays)."""
        for n in nodes:
            self.cluster.fault_ctl(n, "net-heal", self.tag)
        return {}

    def heal(self) -> None:
        """Remove this nemesis's drop rules on every node."""
        self.end(self._everyone())


def _net(name: str, targets: tuple[str, ...], grudge: GrudgeFn | None = None, **kw: Any) -> Package:
    start, stop = ("start-flaky", "stop-flaky") if "loss" in kw else ("start-partition", "stop-partition")
    colors = {start: COLORS["start-partition"], stop: COLORS["stop-partition"]}
    pkg = targeted(name, lambda c, cfg: NetFault(c, name, grudge, **kw), start_f=start, stop_f=stop,
                   targets=targets, colors=colors, duration=lambda cfg: max(outlive_lag(cfg), outlive_session(cfg)))
    return replace(pkg, heal_first=True, needs_controllers=QUORUM if kw.get("quorum") else 0)


ONE = ("one", "leader", "follower", "followers", "controller", "minority", "majority", *NODE_ROLES)
QUORUM = 3  # dedicated controllers a quorum cut needs: with fewer, controllers and brokers share addresses
PACKAGES = (
    _net("partition-one", ONE),
    _net("partition-leader", ("leader",)),
    _net("partition-controller", ("controller",)),
    _net("partition-halves", ("all",), halves),
    _net("partition-majorities-ring", ("all",), majorities_ring),
    _net("partition-bridge", ("all",), bridge),
    _net("partition-oneway", ONE, oneway),
    _net("partition-client", ONE + ("all",), clients=True),
    _net("flaky", ("all",) + ONE, lossy, loss=FLAKY_LOSS),
    # Among dedicated controllers only: the active one cut off from the other controllers, or no two
    # controllers in touch (no quorum). Brokers still reach every controller and every broker.
    _net("partition-quorum", ("controller",), quorum=True),
    _net("partition-quorum-all", ("all",), apart, quorum=True),
)
