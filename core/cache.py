"""kchaos's machine-wide cache: things made once and reused by every run (Kafka's jars, the Java client, the
Spark checker's class archive), in `$KCHAOS_CACHE` (default `~/.cache/kchaos`)."""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """Root of kchaos's machine-wide cache."""
    return Path(os.environ.get("KCHAOS_CACHE", Path.home() / ".cache" / "kchaos"))


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Hold the machine-wide lock `name` (a file under the cache) for the block: processes that would make the
    same cached thing (a release's jars, an image) take turns, and whoever comes second finds it made."""
    path = cache_dir() / "locks" / f"{name.replace('/', '_').replace(':', '-')}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield  # closing the file lets go
