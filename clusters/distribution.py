"""The Kafka binary distribution: a directory of jars, from Maven Central or a user's tarball.

Resolved once and cached outside the repository, in `$KCHAOS_CACHE`
(default `~/.cache/kchaos`), as `kafka-<version>/libs`.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kchaos.core.cache import cache_dir, cache_lock
from kchaos.core.kafka_versions import UnsupportedVersion, line_of

POM = Path(__file__).with_name("kafka-pom.xml")
COMPLETE = ".complete"


class DistributionError(RuntimeError):
    """The Kafka jars could not be found or resolved."""


@dataclass(frozen=True)
class KafkaDist:
    """A usable Kafka distribution: `libs` holds every jar the broker and tools need."""

    version: str
    libs: Path
    source: str  # "maven" or the user's path

    def fingerprint(self) -> str:
        """A digest of the jar names and sizes: changes whenever the distribution does."""
        h = hashlib.sha256()
        for jar in sorted(self.libs.glob("*.jar")):
            h.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
        return h.hexdigest()


def resolve(version: str, kafka_dist: str | None = None) -> KafkaDist:
    """Find or fetch Kafka `version`.

    `kafka_dist` (or `$KAFKA_HOME`) may name an extracted `kafka_2.13-x.y.z`
    directory or its `.tgz`; otherwise the jars come from Maven Central.
    """
    user = kafka_dist or os.environ.get("KAFKA_HOME")
    if user:
        return _from_user(Path(user).expanduser())
    return _from_maven(version)


def tools_version(version: str) -> str:
    """The release whose kafka-tools goes beside Kafka `version`: its own, unless its line's entry in
    core.kafka_versions names the nearest release that works."""
    try:
        return line_of(version).tools_version or version
    except UnsupportedVersion:
        return version


def cached_versions() -> set[str]:
    """The Kafka releases whose jars from Maven Central are complete in the cache."""
    root = cache_dir()
    return {d.name.removeprefix("kafka-") for d in root.glob("kafka-*") if (d / COMPLETE).exists()} if root.is_dir() \
        else set()


def run_libs(test: dict) -> Path:
    """The Kafka jars of a finished run, from its test.json: the Kafka version it recorded (3.7.2 when it
    recorded none) and its --kafka-dist, resolved as `resolve` does; after a rolling upgrade that was not
    rolled back, the release it rolled to (whose files an older tool may not read)."""
    v = (test.get("versions") or {}).get("kafka") or (test.get("cluster") or {}).get("kafka_version") or "3.7.2"
    n = test.get("nemesis") or {}
    if n.get("upgrade_to") and n.get("upgrade_then") != "downgrade":
        v = n["upgrade_to"]
    return resolve(v, (test.get("cluster") or {}).get("kafka_dist")).libs


def check_user_dist(path: str) -> None:
    """Raise DistributionError unless `path` looks like a Kafka distribution (cheap; no extraction)."""
    p = Path(path).expanduser()
    if p.is_dir():
        if not any((p / "libs").glob("kafka_2.13-*.jar")):
            raise DistributionError(f"--kafka-dist {p}: no libs/kafka_2.13-*.jar inside; "
                                    "expected an extracted kafka_2.13-3.7.x")
    elif p.is_file():
        if not (p.name.endswith(".tgz") or p.name.endswith(".tar.gz")):
            raise DistributionError(f"--kafka-dist {p}: expected a directory or a .tgz")
    else:
        raise DistributionError(f"--kafka-dist {p}: no such file or directory")


def _version_of(libs: Path) -> str:
    for jar in libs.glob("kafka_2.13-*.jar"):
        m = re.fullmatch(r"kafka_2\.13-(\d+\.\d+\.\d+)\.jar", jar.name)
        if m:
            return m.group(1)
    raise DistributionError(f"{libs}: no kafka_2.13-<version>.jar")


def _from_user(path: Path) -> KafkaDist:
    check_user_dist(str(path))
    if path.is_file():
        dest = cache_dir() / "dist" / path.name.removesuffix(".tgz").removesuffix(".tar.gz")
        if not (dest / COMPLETE).exists():
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            with tarfile.open(path) as tf:
                tf.extractall(dest, filter="data")
            (dest / COMPLETE).touch()
        tops = [d for d in dest.iterdir() if d.is_dir()]
        if len(tops) != 1:
            raise DistributionError(f"{path}: expected one top-level directory in the tarball")
        path = tops[0]
    libs = path / "libs"
    return KafkaDist(_version_of(libs), libs, str(path))


def _from_maven(version: str) -> KafkaDist:
    root = cache_dir() / f"kafka-{version}"
    if (root / COMPLETE).exists():
        return KafkaDist(version, root / "libs", "maven")
    with cache_lock(root.name):
        return _fetch(version, root)


def _fetch(version: str, root: Path) -> KafkaDist:
    libs = root / "libs"
    if (root / COMPLETE).exists():  # fetched while this process waited for the lock
        return KafkaDist(version, libs, "maven")
    if shutil.which("mvn") is None:
        raise DistributionError("Maven (mvn) is not installed; run `make setup`, or pass --kafka-dist")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        pom = Path(tmp) / "pom.xml"
        shutil.copy(POM, pom)
        cmd = ["mvn", "-q", "-B", "-f", str(pom), f"-Dkafka.version={version}",
               f"-Dtools.version={tools_version(version)}", "dependency:copy-dependencies", f"-DoutputDirectory={libs}",
               "-DincludeScope=runtime"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not (libs / f"kafka_2.13-{version}.jar").exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise DistributionError(f"could not resolve Kafka {version} from Maven Central: {' | '.join(tail)}")
    (root / COMPLETE).touch()
    return KafkaDist(version, libs, "maven")
