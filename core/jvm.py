"""How kchaos starts the JVMs it runs on the host for seconds at a time (Kafka's tools, its Java clients, Spark's
driver)."""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kchaos.core.cache import cache_dir

__all__ = ["SHORT_LIVED", "archiving", "class_archive"]

# A JVM that lives seconds spends them loading classes and compiling: the quick C1 compiler alone, and the serial
# collector, whose one thread costs less than the parallel collector's many on a small heap.
SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


@contextmanager
def class_archive(java: str, name: str, *identity: str) -> Iterator[list[str]]:
    """JVM options for one run of a short-lived program on `java`: load its classes from an archive in kchaos's
    cache, named `name` and keyed by `identity` (its classpath, its mode: whatever decides the classes it loads)
    and by the JVM itself. Where there is none yet, the run writes one as it exits, kept when the block ends
    without an exception. The classpath must name jars only: a JVM asked to archive classes from a directory
    exits 1 after its work. A JVM that writes no archive leaves a mark, and later runs use none; a JVM that
    finds an archive it cannot use ignores it and loads its classes as usual.

    Reading classes from an archive spares most of a short JVM's start: Kafka's DumpLogSegments over a demo
    run's segments took 1.0 to 1.2 s with one and 1.8 s without."""
    real = Path(shutil.which(java) or java).resolve()
    try:
        stamp = str(real.stat().st_mtime_ns)
    except OSError:
        stamp = ""
    key = hashlib.sha256("\n".join((str(real), stamp, *identity)).encode()).hexdigest()[:20]
    path = cache_dir() / "cds" / f"{name}-{key}.jsa"
    none = path.with_suffix(".none")
    if path.is_file():
        yield [f"-XX:SharedArchiveFile={path}", *_QUIET]
        return
    if none.exists():
        yield []
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        yield [f"-XX:ArchiveClassesAtExit={tmp}", *_QUIET]
        if tmp.is_file() and tmp.stat().st_size:
            os.replace(tmp, path)
        else:
            none.touch()
    finally:
        tmp.unlink(missing_ok=True)


def archiving(options: list[str]) -> bool:
    """Whether `class_archive`'s `options` write an archive as the JVM exits (this is the program's first run)."""
    return any(o.startswith("-XX:ArchiveClassesAtExit=") for o in options)
