"""A workload's client threads: the counters they add to (which the progress line reads), and waiting for them
to end."""
from __future__ import annotations

import logging
import sys
import threading
import time
import traceback


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


def join_all(threads: list[threading.Thread], timeout: float, log: logging.Logger) -> list[threading.Thread]:
    """Wait until every thread ended or `timeout` seconds passed, whichever is first (one deadline for all of
    them); warn of those still running, with where each one is, and return them.

    A thread still running then is stuck past every timeout its client calls were given (librdkafka's
    send_offsets_to_transaction can ignore its timeout, confluentinc/librdkafka#5456): its op stays an
    open invoke in the history, which is what it is. The workloads drop such threads (daemon threads)
    rather than wait for them again when the runner stops them a second time."""
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = [t for t in threads if t.is_alive()]
    if alive:
        log.warning("client threads still running after %.0f s, left behind: %s", timeout, [t.name for t in alive])
        frames = sys._current_frames()
        for t in alive:
            if t.ident in frames:
                log.warning("%s is at:\n%s", t.name, "".join(traceback.format_stack(frames[t.ident])).rstrip())
    return alive
