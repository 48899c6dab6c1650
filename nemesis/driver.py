"""Plays a fault schedule against the cluster on its own thread, recording every fault in the history."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kchaos.core.history import History
from kchaos.core.protocols import Cluster, Nemesis
from kchaos.nemesis.base import FaultSkipped, ScheduledOp
from kchaos.nemesis.targets import awaited

log = logging.getLogger("kchaos.nemesis")


class NemesisDriver:
    """Applies `schedule` (times relative to `start`) with `nemeses` (by spec); `stop_and_heal` always heals.

    An op's `await_isr` precondition on `topic` is held here, before the nemesis sees the op, and
    `stop_and_heal` cuts that wait short.
    """

    def __init__(self, nemeses: dict[str, Nemesis], cluster: Cluster, history: History,
                 schedule: list[ScheduledOp], topic: str):
        self.history, self.topic = history, topic
        self.cluster = cluster
        self.nemeses = nemeses
        self.schedule = sorted(schedule, key=lambda s: s.at)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.applied = 0
        self._healed = False
        self._next = 0  # the schedule's first op not yet played

    def start(self) -> None:
        """Set up every nemesis and start playing the schedule from now."""
        for n in self.nemeses.values():
            n.setup(self.cluster, self.history)
        t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(t0,), name="nemesis", daemon=True)
        self._thread.start()

    def _run(self, t0: float) -> None:
        for i, sop in enumerate(self.schedule):
            if self._stop.wait(max(0.0, t0 + sop.at - time.monotonic())):
                return
            self._next = i + 1
            self.apply(sop.nemesis, sop.op)

    def apply(self, name: str, op: dict[str, Any]) -> dict[str, Any] | None:
        """Invoke one fault op now (once its precondition holds), recording invoke and completion;
        a failure is recorded as info."""
        fields = {k: v for k, v in op.items() if k != "f"}
        inv = self.history.invoke("nemesis", op["f"], nemesis=name, **fields)
        try:
            waited = awaited(self.cluster, self.topic, op, self._stop)
            result = {**waited, **self.nemeses[name].invoke(op)}
        except FaultSkipped as e:
            self.history.complete(inv, "info", nemesis=name, error=str(e))
            return None
        except Exception as e:
            log.exception("nemesis %s failed on %s", name, op)
            self.history.complete(inv, "info", nemesis=name, error=f"{type(e).__name__}: {e}")
            return None
        self.applied += 1
        self.history.complete(inv, "ok", nemesis=name, **result)
        return result

    def stop_and_heal(self, finish: bool = True) -> None:
        """Stop the schedule; with `finish`, play the rest of the ops of a nemesis that finishes its schedule
        (a rolling upgrade: `finish_schedule`); then heal every nemesis (recorded as a `heal` op). Later calls do
        nothing. An interrupted run passes finish=False: it heals at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._healed:
            return
        self._healed = True
        # A nemesis whose ops are one change in steps (a rolling upgrade) plays them to the end before healing.
        for sop in self.schedule[self._next:] if finish else ():
            if getattr(self.nemeses.get(sop.nemesis), "finish_schedule", False):
                self.apply(sop.nemesis, sop.op)
        self._next = len(self.schedule)
        for name, n in self.nemeses.items():
            inv = self.history.invoke("nemesis", "heal", nemesis=name)
            try:
                n.teardown()
                self.history.complete(inv, "ok", nemesis=name)
            except Exception as e:
                log.exception("healing %s failed", name)
                self.history.complete(inv, "info", nemesis=name, error=f"{type(e).__name__}: {e}")
