"""Clocks that move only when a test says, for a flusher that waits with `wait(closed, timeout)` (History and
SendStream take one): `ManualClock` in this process, `ClockedChild` in a child process."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path


class ManualClock:
    """Time for one waiting thread, moved only by `advance`."""

    def __init__(self) -> None:
        self.now = 0.0
        self._cond = threading.Condition()
        self._until: float | None = None  # when the thread's wait ends; None while it does not wait

    def wait(self, closed: threading.Event, timeout: float) -> bool:
        """Return False once `timeout` has passed on this clock, True once `closed` is set."""
        with self._cond:
            self._until = self.now + timeout
            self._cond.notify_all()
            while self.now < self._until and not closed.is_set():
                self._cond.wait(0.01)  # (setting `closed` does not notify this condition)
            self._until = None
            return closed.is_set()

    def advance(self, seconds: float) -> None:
        """Move the time on; if that ends the thread's wait, return once it has done what follows and waits
        again."""
        with self._cond:
            assert self._cond.wait_for(lambda: self._until is not None, 10), "nothing waits on the clock"
            self.now += seconds
            self._cond.notify_all()
            assert self._cond.wait_for(lambda: self._until is not None and self._until > self.now, 10), \
                "the thread did not come back to wait"


_WAIT = """import os as _os, sys as _sys
def wait(closed, timeout):
    _os.write(1, b"waiting\\n")
    return not _sys.stdin.readline()
"""


class ClockedChild:
    """`python -c CODE` where CODE may pass `wait` (defined for it) to a flusher: each wait ends when the test
    calls `tick`. CODE says `os.write(1, b"ready\\n")` when the test may go on."""

    def __init__(self, code: str, cwd: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", _WAIT + code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=cwd)
        self._waits = self._ticks = 0

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        assert line, f"the child exited ({self.proc.wait()})"
        self._waits += line == "waiting\n"
        return line

    def ready(self) -> None:
        """Return once the child said `ready`."""
        while self._line() != "ready\n":
            pass

    def tick(self, wait: bool = True) -> None:
        """End the flusher's wait, as if `timeout` had passed; unless told not to, return once the flusher is
        done with what follows and waits again."""
        self._ticks += 1
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        while wait and self._waits <= self._ticks:  # wait k + 1 begins after the pass that tick k started
            self._line()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()
