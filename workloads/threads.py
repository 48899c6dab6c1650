"""A workload's client threads: the counters they add to (which the progress line reads), and waiting for them
to end."""
from __future__ import annotations

import logging
import threading


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
    """Wait up to `timeout` seconds for each thread; warn of those still running, and return them."""
    for t in threads:
        t.join(timeout)
    alive = [t for t in threads if t.is_alive()]
    if alive:
        log.warning("client threads still running: %s", [t.name for t in alive])
    return alive
