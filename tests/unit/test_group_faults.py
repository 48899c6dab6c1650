"""crash-client in consumer groups: which member it crashes, and how the crashed consumers are let go of."""
from __future__ import annotations

import threading
import time

from kchaos.workloads.rebalance import drop


class _Freed:
    """Sets `freed` when collected; blocks its finalizer until `release` when told to, as a librdkafka destroy can."""

    def __init__(self, freed: threading.Event, release: threading.Event | None = None):
        self.freed, self.release, self.cycle = freed, release, self

    def __del__(self) -> None:
        if self.release is not None:
            self.release.wait()
        self.freed.set()


def test_drop_frees_crashed_consumers_even_in_cycles():
    freed = threading.Event()
    consumers = [_Freed(freed)]
    assert drop(consumers) is True
    assert consumers == [] and freed.is_set()


def test_a_destroy_that_blocks_leaves_its_thread_and_the_caller_goes_on(caplog):
    freed, release = threading.Event(), threading.Event()
    consumers = [_Freed(freed, release)]
    start = time.monotonic()
    assert drop(consumers, timeout=0.3) is False
    assert time.monotonic() - start < 5 and consumers == [] and not freed.is_set()
    assert "did not destroy 1 crashed consumer(s) within 0.3 s" in caplog.text
    release.set()
    assert freed.wait(5)


class _Member:
    def __init__(self, held: set[int]):
        self.held, self.crashed = held, []

    def crash(self, restart_after: float) -> None:
        self.crashed.append(restart_after)


def test_crash_client_picks_among_the_members_holding_partitions():
    from kchaos.core.config import TestConfig
    from kchaos.workloads.queue.workload import QueueWorkload

    w = QueueWorkload(TestConfig())
    w._members = {2: _Member(set()), 3: _Member({0, 1, 2}), 4: _Member(set())}
    assert {w.crash_client(pick, 1.0)["member"] for pick in range(20)} == {3}
    w._members[3].held = set()  # nobody holds anything: any member
    assert {w.crash_client(pick, 1.0)["member"] for pick in range(20)} == {2, 3, 4}
