"""A lazyfs daemon on this host for tests: mount, crash, power failure, control commands."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

PAGE = 4096


class Mount:
    """One lazyfs daemon on `root/mnt` over `root/backing`, with a control FIFO."""

    def __init__(self, binary: Path, root: Path, *args: str):
        self.binary, self.args = binary, args
        self.backing, self.mnt = root / "backing", root / "mnt"
        self.ctl, self.log, self.stderr = root / "ctl", root / "lazyfs.log", root / "stderr"
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mnt.mkdir(exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self._stats = 0

    def start(self) -> None:
        cmd = [str(self.binary), f"--ctl={self.ctl}", f"--log={self.log}", *self.args, str(self.backing), str(self.mnt)]
        with open(self.stderr, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         start_new_session=True)
        deadline = time.monotonic() + 5
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"lazyfs did not mount: {self.stderr.read_text()[-2000:]}")
            time.sleep(0.005)

    def crash(self) -> None:
        """SIGKILL the daemon, leaving its dead mount behind."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def kill(self) -> None:
        """SIGKILL the daemon and detach its mount; safe to call twice."""
        self.crash()
        subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)], capture_output=True)

    def power_failure(self) -> None:
        self.kill()
        self.start()

    def command(self, line: str) -> None:
        with open(self.ctl, "w") as f:
            f.write(line + "\n")

    def stats(self) -> dict:
        """Also a barrier: commands are handled in order, so earlier ones are done."""
        self._stats += 1
        out = self.ctl.parent / f"stats-{self._stats}.json"
        self.command(f"stats {out}")
        deadline = time.monotonic() + 5
        while not out.exists():
            assert time.monotonic() < deadline, "no stats from lazyfs"
            time.sleep(0.005)
        return json.loads(out.read_text())

    def advance(self, ms: int) -> dict:
        """`advance MS` on a --manual-clock daemon; the stats after it, by which time the writebacks that fell in
        those MS are done."""
        self.command(f"advance {ms}")
        return self.stats()

    def __truediv__(self, name: str) -> Path:
        return self.mnt / name


def put(path: Path, data: bytes, off: int = 0, sync: bool = False) -> None:
    """pwrite `data` at `off` (creating the file), then fsync if asked."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fd, data, off) == len(data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
