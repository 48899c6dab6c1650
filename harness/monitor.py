"""The ISR monitor: polls the test topic's metadata every second during a run and records it in `isr.jsonl`.

One JSON object per line, on the history's clock (ns since the history was
opened), appended and flushed as it happens:

    {"time": 12000000000, "partition": 0, "leader": 2, "replicas": [1, 2, 3], "isr": [2, 3]}
    {"time": 13000000000, "error": "KafkaError{code=_TRANSPORT,...}"}

A sample that fails (no broker answered within the timeout) is one `error`
line; the report draws it as a gap. Leader -1 means the partition had none.
"""
from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from kchaos.clusters import admin
from kchaos.core.history import History

log = logging.getLogger("kchaos.monitor")


class IsrMonitor:
    """Background thread recording leader, replicas and ISR of every partition of `topic` once per `period`."""

    def __init__(self, bootstrap: str, topic: str, history: History, path: Path, period: float = 1.0):
        self.bootstrap, self.topic, self.history, self.period = bootstrap, topic, history, period
        self.path = Path(path)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling (the first sample is taken at once)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="isr-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.period + 10)
            self._thread = None

    def _loop(self) -> None:
        self._client = admin.admin_client(self.bootstrap, timeout_ms=int(self.period * 1000))
        with open(self.path, "a", encoding="utf-8") as fh:
            while True:
                t = self.history.now()
                for line in self._sample(t):
                    fh.write(json.dumps(line, separators=(",", ":")) + "\n")
                fh.flush()
                # Sample on a fixed grid so a slow metadata call does not stretch the series.
                elapsed = (self.history.now() - t) / 1e9
                if self._stop.wait(max(0.0, self.period - elapsed)):
                    return

    def _sample(self, t: int) -> list[dict]:
        try:
            parts = admin.partitions(self.bootstrap, self.topic, timeout=max(0.5, self.period * 0.8),
                                     client=self._client)
        except Exception as e:
            return [{"time": t, "error": str(e).splitlines()[0][:300]}]
        return [{"time": t, "partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                 "isr": list(p.isr)} for p in sorted(parts.values(), key=lambda s: s.partition)]
