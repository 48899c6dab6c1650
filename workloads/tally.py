"""Counters that a workload's client threads add to and the progress line reads."""
from __future__ import annotations

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
