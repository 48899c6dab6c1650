"""A rolling upgrade between Kafka releases under load, as an operator does one: `upgrade`.

Each `upgrade` op takes one node not yet on the op's release (controllers
first, then brokers, the order drawn from the seed): it stops Kafka cleanly
(SIGTERM, as `rolling-restart`), points the node at the release's jars (staged
on every node before the workload starts) and its line's node settings, starts
it, and waits until it is back in the ISR of every partition it holds. One
node per op, so other nemeses' faults can fall between two nodes; the wait
looks at this node only, since a node another nemesis holds down comes back
only after this op.
After the roll, by --upgrade-then:

- `finalize`: kafka-features upgrade, run with the new release's tool:
  metadata.version first (`--metadata LINE`), then from 4.0 the release's
  other features (`--release-version LINE`: ELR, transaction.version,
  group.version). Brokers that registered under the old metadata.version
  do not offer those features until they register again (rolling 3.7.2 to
  4.4.0: "Broker 2 does not support this feature"), so when the second step
  is refused every node is restarted once more, one at a time, and the step
  is run again. (From 3.9 and 4.0 the brokers offer the features at once.)
  A controller restarted just before (another nemesis's kill) makes Kafka
  refuse kraft.version's upgrade until it has told the quorum what it
  supports; the step is then tried again for up to 30 s, while every
  controller runs (a controller held down comes back only after this op).
- `stay`: the features stay the old release's, as Kafka's upgrade notes
  advise until the new release is known good.
- `downgrade`: a second roll back to --kafka-version, which Kafka allows only
  while the features are not finalized.

A roll begun is finished: ops the time limit cuts off are played before the
heal (NemesisDriver, `finish_schedule`), with the workload still running.
Healing then starts any node an op left down, on whatever release it was
given; an upgrade is a change of state, not a fault to undo.
"""
from __future__ import annotations

import random
import re
import time
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from kchaos.clusters import admin
from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.kafka_versions import line_of
from kchaos.core.protocols import RollingUpgrade
from kchaos.nemesis.base import FaultSkipped, Package, ScheduledOp
from kchaos.nemesis.process import Signal

COLORS = {"upgrade": "#4e79a7", "finalize": "#76b7b2"}
START = 0.15  # the roll starts after this share of the time limit: the workload has run a while
REJOIN_S = 120.0  # how long a restarted node may take to be back in the ISR
REJOIN_POLL_S = 0.25  # how often the node is asked: each second of the roll's waits is a second more of heal
# kraft.version's upgrade needs every controller to have told the quorum what it supports: a controller that has
# just been restarted (by another nemesis, between the roll's last node and the finalize) has not yet. Kafka's
# refusal then quotes this; the step is tried again, as an operator would, for up to VOTERS_WAIT_S, but only while
# every controller runs: one another nemesis holds down comes back only after this op (ops are played one at a
# time), so waiting for it would only hold its restart back (measured: 30 s longer outage, same refusal).
VOTERS_NOT_READY = "not all of the voters support it"
VOTERS_WAIT_S = 30.0


class Upgrade:
    """Rolls the cluster's nodes to a release, one node per `upgrade` op; `finalize` bumps the features."""

    name = "upgrade"
    finish_schedule = True  # the driver plays a roll to its end after the time limit, before healing

    def __init__(self, cluster: RollingUpgrade, cfg: TestConfig):
        self.cluster, self.cfg = cluster, cfg

    def setup(self, cluster: RollingUpgrade, history: History) -> None:
        """Stage the new release's jars on every node."""
        cluster.stage_release(str(self.cfg.nemesis.upgrade_to))

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """`{"f": "upgrade", "version": V, "pick": K}`: restart the next node (drawn by K) on release V, and
        record which, from which release, and how long it was out; `{"f": "finalize", "version": V}`: finalize
        the roll to V. FaultSkipped when every node already runs V."""
        version = op["version"]
        if op["f"] == "finalize":
            return {"version": version, **self._finalize(version)}
        if op["f"] != "upgrade":
            raise ValueError(f"upgrade cannot {op['f']!r}")
        c = self.cluster
        todo = [n for n in self._order() if c.release[n] != version]
        if not todo:
            raise FaultSkipped(f"every node runs Kafka {version} already")
        controllers = [n for n in todo if n not in c.nodes]
        node = random.Random(op.get("pick", 0)).choice(controllers or todo)
        was = c.release[node]
        return {"node": node, "from": was, "to": version, "seconds": self._restart(node, version),
                "releases": dict(sorted(c.release.items()))}

    def _order(self) -> list[str]:
        """Dedicated controllers, then brokers."""
        c = self.cluster
        return sorted(n for n in c.controllers if n not in c.nodes) + sorted(c.nodes)

    def _restart(self, node: str, version: str) -> float:
        """Stop `node` cleanly, have it run `version`, start it, and wait until it is back in the ISR of every
        partition it holds (the operator's test before the next node); the seconds it took."""
        c, t0 = self.cluster, time.monotonic()
        c.stop(node)
        c.use_release(node, version)
        c.start(node)
        self._rejoined(node, REJOIN_S)
        return round(time.monotonic() - t0, 1)

    def _rejoined(self, node: str, timeout: float) -> None:
        """Wait until `node` runs and is in the ISR of every partition of the topic it is a replica of. Only
        this node: another nemesis may hold another node down, and its mend waits behind this op."""
        topic = self.cfg.topic.name

        def check() -> None:
            if not self.cluster.is_running(node):
                raise RuntimeError(f"{node}: Kafka is not running")
            if node not in self.cluster.nodes:  # a dedicated controller holds no partition
                return
            # Asked of the node itself: a broker answers only once it has caught up with the metadata log, so what
            # it says is no older than its own shutdown (another broker's metadata may still list it in sync).
            parts = admin.partitions(self.cluster.listener(node), topic)
            out = [p for p, s in parts.items() if any(self.cluster.node_of(r) == node for r in s.replicas)
                   and node not in {self.cluster.node_of(i) for i in s.isr}]
            if not parts or out:
                raise RuntimeError(f"{node} not back in the ISR of {topic} partitions {out} after {timeout:.0f}s")
        Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(REJOIN_POLL_S), reraise=True)(check)

    def _finalize(self, version: str) -> dict[str, Any]:
        """metadata.version, then (from 4.0) the other features, with a rolling restart between when the brokers
        do not offer them yet (the module doc)."""
        c = self.cluster
        out: dict[str, Any] = {"metadata": c.upgrade_features(version, 0)}
        if line_of(version).major < 4:
            return out
        try:
            out.update(self._release_features(version))
        except RuntimeError as e:  # the cluster's error quoting the tool
            if "does not support" not in str(e):
                raise
            why = re.findall(r"[^:\n]*does not support this feature\.?", str(e))  # the tool's last reason
            out["refused"] = (why[-1] if why else str(e)[-300:]).strip()
            out["restarted"] = {n: self._restart(n, version) for n in self._order()}
            out.update(self._release_features(version))
        return out

    def _release_features(self, version: str) -> dict[str, Any]:
        """The finalize's second step, tried again every 2 s for up to VOTERS_WAIT_S while Kafka says a voter has
        not yet told the quorum what it supports and every controller runs; any other refusal at once. Returns
        the tool's answer as `features`, and `features_tries` when it took more than one try."""
        def starting(e: BaseException) -> bool:
            return VOTERS_NOT_READY in str(e) and all(self.cluster.is_running(n) for n in self.cluster.controllers)
        retry = Retrying(stop=stop_after_delay(VOTERS_WAIT_S), wait=wait_fixed(2), reraise=True,
                         retry=retry_if_exception(starting))
        out = {"features": retry(self.cluster.upgrade_features, version, 1)}
        if (tries := retry.statistics.get("attempt_number", 1)) > 1:
            out["features_tries"] = tries
        return out

    def teardown(self) -> None:
        """Start any node a failed op left down (on the release it was given)."""
        Signal(self.cluster, "stop").heal()


def plan(cfg: TestConfig, rng: random.Random, spec: str, at: float, step: float) -> list[ScheduledOp]:
    """The roll's ops from `at`, `step` seconds apart: an `upgrade` per node to --upgrade-to, then the finalize,
    or an `upgrade` per node back to --kafka-version (downgrade), or nothing more (stay)."""
    n = cfg.nemesis
    nodes = cfg.cluster.nodes + cfg.cluster.controllers
    versions = [str(n.upgrade_to)] * nodes + ([cfg.cluster.kafka_version] * nodes if n.upgrade_then == "downgrade"
                                              else [])
    ops = [ScheduledOp(at + i * step, spec, {"f": "upgrade", "version": v, "pick": rng.randrange(2**31)})
           for i, v in enumerate(versions)]
    if n.upgrade_then == "finalize":
        ops.append(ScheduledOp(at + len(versions) * step, spec, {"f": "finalize", "version": str(n.upgrade_to)}))
    return ops


def _schedule(rng: random.Random, cfg: TestConfig, spec: str, target: str | None) -> list[ScheduledOp]:
    """The roll from START of the time limit, a node every --interval (closer when they would not all fit: an
    op whose time has come waits for the one before it to finish)."""
    steps = (cfg.cluster.nodes + cfg.cluster.controllers) * (2 if cfg.nemesis.upgrade_then == "downgrade" else 1) + 1
    at = cfg.time_limit * START
    return plan(cfg, rng, spec, at, min(cfg.nemesis.interval, (cfg.time_limit * 0.9 - at) / steps))


PACKAGES = (Package("upgrade", Upgrade, _schedule, COLORS, (), ("upgrade", "finalize"), mends=False),)
