"""Build the `lazyfs` FUSE filesystem from its C source (lazyfs.c, shipped in this package) and cache the binary.

lazyfs passes a backing directory through, except that written file data stays in the
daemon's memory until fsync: SIGKILL it, `fusermount3 -u -z` the mountpoint and start it
again, and only synced data is left (a power failure). See the header of lazyfs.c for the
command line and the control FIFO commands.

The binary is cached by the content of the source, in
`<cache_dir()>/lazyfs-<sha256[:12]>/lazyfs` (cache_dir() honours $KCHAOS_CACHE), so an
edit of lazyfs.c triggers one rebuild and an unchanged source never recompiles.
"""
from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kchaos.core.cache import cache_dir

SOURCE: Path = Path(__file__).with_name("lazyfs.c")
"""The C source of the filesystem."""

SETUP_HINT = "install libfuse3-dev: run `make setup`"


class LazyfsBuildError(RuntimeError):
    """lazyfs could not be compiled; the message is one line saying why and what to do."""


def source_digest() -> str:
    """The first 12 hex digits of the SHA-256 of `SOURCE`: names the cached build."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]


def binary_path(out_dir: Path | None = None) -> Path:
    """Where `build(out_dir)` puts (or finds) the binary; nothing is built or checked."""
    return Path(out_dir or cache_dir()) / f"lazyfs-{source_digest()}" / "lazyfs"


def _compile_flags() -> list[str]:
    for tool in ("gcc", "pkg-config"):
        if shutil.which(tool) is None:
            raise LazyfsBuildError(f"lazyfs: {tool} not found; install it and libfuse3-dev: run `make setup`")
    r = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True)
    if r.returncode != 0:
        raise LazyfsBuildError(f"lazyfs: pkg-config knows no fuse3; {SETUP_HINT}")
    return r.stdout.split()


def build(out_dir: Path | None = None) -> Path:
    """Return the path of an executable lazyfs built from the current `SOURCE`.

    Compiles with `gcc -O2 -Wall -Wextra` only when the binary is missing from
    `<out_dir or cache_dir()>/lazyfs-<source digest>/`. The binary appears atomically
    (rename), so concurrent callers never run a half-written file. Raises
    LazyfsBuildError when gcc, pkg-config or libfuse3-dev is missing or gcc fails (with
    the last compiler lines in the message).
    """
    out = binary_path(out_dir)
    if os.access(out, os.X_OK):
        return out
    flags = _compile_flags()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".lazyfs-", dir=out.parent)
    os.close(fd)
    try:
        cmd = ["gcc", "-O2", "-Wall", "-Wextra", "-o", tmp, str(SOURCE), *flags, "-lpthread"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            # gcc's source excerpts ("  12 | code", "     |   ^~~") repeat what the messages say
            lines = [ln.strip() for ln in (r.stderr or r.stdout).splitlines()
                     if ln.strip() and not re.match(r"\s*\d*\s*\|", ln)]
            tail = " / ".join(lines[-3:]) or f"gcc exited {r.returncode}"
            hint = f"; {SETUP_HINT}" if "fuse" in tail and "No such file" in tail else ""
            raise LazyfsBuildError(f"lazyfs: compiling {SOURCE.name} failed: {tail}{hint}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


@dataclass(frozen=True)
class Needs:
    """What a host must offer to run a lazyfs binary: its machine (`uname -m`), at least this glibc,
    and these shared libraries (sonames)."""

    machine: str
    glibc: tuple[int, int]
    libraries: tuple[str, ...]

    def args(self) -> list[str]:
        """As arguments of the hosts' prerequisite check: machine, glibc as "2.34", the sonames."""
        return [self.machine, "{}.{}".format(*self.glibc), *self.libraries]


def needs(binary: Path) -> Needs:
    """What `binary` (built here by `build`) needs from a host: this machine's architecture, the
    newest glibc symbol version it links against, and its libraries other than glibc's own, read
    from the ELF's dynamic string table."""
    data = Path(binary).read_bytes()
    versions = [(int(a), int(b)) for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", data)]
    sonames = {m.decode() for m in re.findall(rb"\x00(lib[A-Za-z0-9_+-]+\.so\.[0-9]+)\x00", data)}
    libraries = tuple(sorted(n for n in sonames if not n.startswith(("libc.", "libpthread.", "libdl."))))
    return Needs(platform.machine(), max(versions, default=(0, 0)), libraries)
