"""A workload's client threads: the counters they add to (which the progress line reads), and waiting for them
to end."""
from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
GRACE_S = 5.0  # how long past its own timeout a client call may still be returning before it counts as stuck
_IN_CALL: dict[int, tuple[str, float, float]] = {}  # thread ident -> (call, when it began, its timeout), monotonic


class Tally:
    """Named counters, each starting at 0; `add` is safe from any thread, `snapshot` is a consistent copy."""

    def __init__(self, *keys: str):
        self._counts = dict.fromkeys(keys, 0)
        self._lock = threading.Lock()

    def add(self, key: str, n: int = 1) -> None:
        """Add `n` to the counter `key`."""
        with self._lock:
            self._counts[key] += n

    def snapshot(self) -> dict[str, int]:
        """Every counter, as of now."""
        with self._lock:
            return dict(self._counts)


def timed(timeout: float, call: Callable[..., T], *args: Any) -> T:
    """`call(*args, timeout)`, a client call given `timeout` seconds to return, with the calling thread marked as
    inside it (by the call's name) while it runs: `join_all` stops waiting for a thread still inside it GRACE_S
    past that timeout."""
    ident = threading.get_ident()
    _IN_CALL[ident] = (call.__name__, time.monotonic(), timeout)
    try:
        return call(*args, timeout)
    finally:
        _IN_CALL.pop(ident, None)


def overdue(thread: threading.Thread, now: float | None = None) -> str | None:
    """What `thread` is stuck in: the `timed` call it is still inside GRACE_S past that call's own timeout, as
    "<call>, N s past its T s timeout"; None when it is not inside one or its time is not up."""
    entry = _IN_CALL.get(thread.ident or -1)
    if entry is None:
        return None
    name, began, timeout = entry
    late = (time.monotonic() if now is None else now) - began - timeout
    return f"{name}, {late:.0f} s past its {timeout:g} s timeout" if late > GRACE_S else None


def await_ready(ready: list[Callable[[], bool]], threads: list[threading.Thread], timeout: float,
                log: logging.Logger, what: str) -> None:
    """Wait until every `ready()` is true, at most `timeout` seconds and only while one of `threads` runs; log how
    long that took, or how many were not ready (`what` names one, as "transactional producer")."""
    began = time.monotonic()
    waiting = list(ready)
    while waiting and time.monotonic() - began < timeout and any(t.is_alive() for t in threads):
        waiting = [r for r in waiting if not r()]
        time.sleep(0.05)
    took = time.monotonic() - began
    if waiting:
        log.warning("%d of %d clients had no %s after %.1f s; the faults start anyway", len(waiting), len(ready), what,
                    took)
    else:
        log.info("every client's %s was ready after %.1f s", what, took)


def join_all(threads: list[threading.Thread], timeout: float, log: logging.Logger) -> list[threading.Thread]:
    """Wait until every thread ended or `timeout` seconds passed, whichever is first (one deadline for all of
    them), or until every thread still running is stuck in a client call past its own timeout (`overdue`);
    warn of those still running, with where each one is, and return them.

    A thread still running then is stuck past the timeout its client call was given (librdkafka's
    send_offsets_to_transaction can ignore its timeout when the group coordinator goes away,
    confluentinc/librdkafka#5456 and #5511): its op stays an open invoke in the history, which is what it is.
    The workloads drop such threads (daemon threads) rather than wait for them again when the runner stops
    them a second time."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        alive = [t for t in threads if t.is_alive()]
        now = time.monotonic()
        if not alive or now >= deadline or all(overdue(t, now) for t in alive):
            break
        alive[0].join(min(0.2, deadline - now))
    if alive:
        log.warning("client threads still running after %.0f s, left behind: %s", time.monotonic() - start,
                    [t.name for t in alive])
        frames = sys._current_frames()
        for t in alive:
            stuck = overdue(t)
            where = "".join(traceback.format_stack(frames[t.ident])).rstrip() if t.ident in frames else ""
            log.warning("%s is at%s:\n%s", t.name, f" (stuck in {stuck})" if stuck else "", where)
    return alive
