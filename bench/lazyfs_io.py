"""Benchmark: sequential appends through lazyfs against the plain backing directory.

    python bench/lazyfs_io.py [--mib N] [--dir DIR]      (default: 256 MiB under $TMPDIR)

For 1 KiB and 64 KiB writes, appends N MiB to a fresh file with an fsync every 8 MiB and
a final one, once directly in a directory and once through a lazyfs mount whose backing
directory sits on the same filesystem. Prints MB/s for each and lazyfs/plain. Needs root
and /dev/fuse; builds lazyfs with clusters.lazyfs.build().
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kchaos.clusters.lazyfs import build

SYNC_EVERY = 8 << 20


def appends(path: Path, block: int, total: int) -> float:
    """Append `total` bytes in `block`-sized writes, fsync every 8 MiB; return MB/s."""
    buf = os.urandom(block)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    t = time.perf_counter()
    written = since_sync = 0
    try:
        while written < total:
            n = os.write(fd, buf)
            written += n
            since_sync += n
            if since_sync >= SYNC_EVERY:
                os.fsync(fd)
                since_sync = 0
        os.fsync(fd)
    finally:
        os.close(fd)
    return total / (time.perf_counter() - t) / 1e6


class Lazyfs:
    """A lazyfs mount for the duration of a `with` block (killed and detached on exit)."""

    def __init__(self, root: Path):
        self.backing, self.mnt = root / "backing", root / "mnt"
        self.backing.mkdir(parents=True)
        self.mnt.mkdir()
        self.log = root / "lazyfs.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Path:
        self.proc = subprocess.Popen([str(build()), f"--log={self.log}", str(self.backing), str(self.mnt)],
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                sys.exit(f"lazyfs did not mount; see {self.log}")
            time.sleep(0.01)
        return self.mnt

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", str(self.mnt)], capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="MiB appended per run (default 256)")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    a = ap.parse_args()
    total = a.mib << 20
    with tempfile.TemporaryDirectory(prefix="lazyfs-bench-", dir=a.dir) as tmp:
        root = Path(tmp)
        plain = root / "plain"
        plain.mkdir()
        print(f"{a.mib} MiB of appends, fsync every {SYNC_EVERY >> 20} MiB, on {root}")
        print(f"{'write size':>10}  {'plain MB/s':>10}  {'lazyfs MB/s':>11}  {'lazyfs/plain':>12}")
        with Lazyfs(root / "lazy") as mnt:
            for block in (1 << 10, 64 << 10):
                direct = appends(plain / f"f{block}", block, total)
                lazy = appends(mnt / f"f{block}", block, total)
                os.unlink(plain / f"f{block}")
                os.unlink(mnt / f"f{block}")
                print(f"{block >> 10:>7} KiB  {direct:>10.1f}  {lazy:>11.1f}  {lazy / direct:>12.2f}")


if __name__ == "__main__":
    main()
