"""The Java client (`kchaos.workloads.java`: KchaosTxnClient.java, its main; KchaosTxnConsumer.java,
KchaosCopier.java and the rebalance listener they share, KchaosRebalances.java; the queue workload's
clients, KchaosQueueClients.java, a main of their own; and the share workload's members, share/KchaosShareMembers.java,
compiled only against kafka-clients 4.2 or later): is there a JDK, and compiling it, cached.

It is compiled with `javac` against a Kafka distribution's jars and cached by
the digest of its source and of those jars, so a run compiles it at most once
per source change and per distribution. The caller gives both the jars and the
cache root (clusters.distribution has them; a workload may not import it).
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kchaos.core.jvm import SHORT_LIVED

SOURCES = tuple(sorted((Path(__file__).with_name("java")).glob("*.java")))
# Compiled only against kafka-clients with a production-ready KafkaShareConsumer (4.2 and later), on top of the rest.
SHARE_SOURCES = tuple(sorted((Path(__file__).with_name("java") / "share").glob("*.java")))
SHARE_CLIENTS = (4, 2)
MAIN_CLASS = "KchaosTxnClient"
QUEUE_CLASS = "KchaosQueueClients"  # the queue workload's clients: a main of their own
SHARE_CLASS = "KchaosShareMembers"  # the share workload's members: a main of their own
RELEASE = "17"  # the JDK `make setup` installs; class files for it run on every later JVM too
COMPLETE = ".complete"
# Kafka's own logging goes to stderr, warnings and worse; the harness copies it into harness.log.
LOG4J = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class JavaBuildError(RuntimeError):
    """The Java client could not be compiled."""


@dataclass(frozen=True)
class JavaProgram:
    """The compiled Java client: how to start it, and the kafka-clients version its classpath holds."""

    java: str  # the java launcher
    classes: Path  # the compiled classes and their log4j.properties
    libs: Path  # the Kafka jars it runs with
    clients_version: str

    def command(self) -> list[str]:
        """The command line that starts the client; it then reads requests on stdin (a `JavaProcess`'s)."""
        return [self.java, "-Xms64m", "-Xmx256m", *SHORT_LIVED, "-cp", f"{self.classes}:{self.libs}/*", MAIN_CLASS]

    @property
    def shares(self) -> bool:
        """Whether it holds the share workload's members (kafka-clients 4.2 or later)."""
        return tuple(int(x) for x in self.clients_version.split(".")[:2]) >= SHARE_CLIENTS

    def share_command(self) -> list[str]:
        """The command line that starts the share workload's members (`KchaosShareMembers`); it reads its spec on
        stdin."""
        return [self.java, "-Xms64m", "-Xmx256m", *SHORT_LIVED, "-cp", f"{self.classes}:{self.libs}/*", SHARE_CLASS]

    def queue_command(self) -> list[str]:
        """The command line that starts the queue workload's clients (`KchaosQueueClients`); it reads its spec on
        stdin. They may send at full load for the whole run, so it keeps the JVM's own compilers."""
        return [self.java, "-Xms256m", "-Xmx512m", "-cp", f"{self.classes}:{self.libs}/*", QUEUE_CLASS]


def jdk_problem() -> str | None:
    """None when `java` and `javac` are on PATH; else a one-line description of what is missing."""
    missing = [tool for tool in ("java", "javac") if shutil.which(tool) is None]
    if not missing:
        return None
    return (f"--client java needs a JDK: {' and '.join(missing)} not found on PATH "
            "(`make setup` installs OpenJDK 17; or use --client python)")


def clients_version(libs: Path) -> str:
    """The version of the kafka-clients jar in `libs`; JavaBuildError when there is none."""
    for jar in sorted(libs.glob("kafka-clients-*.jar")):
        m = re.fullmatch(r"kafka-clients-(\d+\.\d+\.\d+)\.jar", jar.name)
        if m:
            return m.group(1)
    raise JavaBuildError(f"{libs}: no kafka-clients-<version>.jar")


def _digest(libs: Path) -> str:
    h = hashlib.sha256()
    for source in (*SOURCES, *SHARE_SOURCES):
        h.update(source.name.encode() + b"\0" + source.read_bytes())
    h.update(f"--release {RELEASE}\n{LOG4J}".encode())
    for jar in sorted(libs.glob("*.jar")):
        h.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def compile_client(libs: Path, cache: Path) -> JavaProgram:
    """The Java client compiled against the jars in `libs`, from `cache/<digest>` when it was compiled before;
    JavaBuildError when there is no JDK or javac fails."""
    if problem := jdk_problem():
        raise JavaBuildError(problem)
    libs = Path(libs)
    version = clients_version(libs)
    out = Path(cache) / _digest(libs)
    if not (out / COMPLETE).exists():
        cache.mkdir(parents=True, exist_ok=True)
        # Compiled aside and renamed into place: concurrent runs never see half a directory.
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            classes = Path(tmp) / "classes"
            proc = subprocess.run(["javac", "--release", RELEASE, "-nowarn", "-encoding", "UTF-8",
                                   "-cp", f"{libs}/*", "-d", str(classes), *map(str, SOURCES)],
                                  capture_output=True, text=True)
            if proc.returncode == 0 and tuple(int(x) for x in version.split(".")[:2]) >= SHARE_CLIENTS:
                proc = subprocess.run(["javac", "--release", RELEASE, "-nowarn", "-encoding", "UTF-8",
                                       "-cp", f"{classes}:{libs}/*", "-d", str(classes), *map(str, SHARE_SOURCES)],
                                      capture_output=True, text=True)
            if proc.returncode != 0:
                tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
                names = ", ".join(s.name for s in (*SOURCES, *SHARE_SOURCES))
                raise JavaBuildError(f"javac could not compile {names} against {libs}: {tail}")
            (classes / "log4j.properties").write_text(LOG4J)
            (classes / COMPLETE).touch()
            try:
                classes.rename(out)
            except OSError:
                if not (out / COMPLETE).exists():  # not another run's copy that got there first
                    raise
    return JavaProgram(java=shutil.which("java") or "java", classes=out, libs=libs, clients_version=version)
