"""Fixtures for the lazyfs tests: the binary, and lazyfs mounts that always die in teardown.

They need /dev/fuse and root, and skip otherwise. A missing compiler or libfuse3-dev is a
failure (LazyfsBuildError says to run `make setup`), not a skip.

And for the Java client's tests: `program`, the client compiled with the real javac against cached Kafka jars
(skipped where there is no JDK or no jars).

And for the option tests: `refused_run`, a `kchaos run` that bad input must stop before anything is created.

Hypothesis gets no deadline: an example that takes longer on a loaded machine is no failure.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings
from lazyfs_mount import Mount

from kchaos.clusters.distribution import COMPLETE
from kchaos.clusters.lazyfs import build
from kchaos.core.cache import cache_dir
from kchaos.harness.cli.main import main
from kchaos.workloads.java_build import compile_client, jdk_problem

settings.register_profile("kchaos", deadline=None)
settings.load_profile("kchaos")

_SPARK_HOME = os.environ.get("SPARK_HOME")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test that starts Spark, here or in a child process, is marked `spark`: the quick tier (`-m "not spark"`)
    runs without it. Unmarked, a SparkContext cannot start (its fixtures neither), because SPARK_HOME names no
    Spark."""
    if item.get_closest_marker("spark") is None:
        os.environ["SPARK_HOME"] = "/this-test-is-not-marked-spark"
    elif _SPARK_HOME is None:
        os.environ.pop("SPARK_HOME", None)
    else:
        os.environ["SPARK_HOME"] = _SPARK_HOME


@pytest.fixture(scope="session")
def binary() -> Path:
    if not os.path.exists("/dev/fuse"):
        pytest.skip("lazyfs tests need /dev/fuse")
    if os.geteuid() != 0:
        pytest.skip("lazyfs tests mount FUSE filesystems: run them as root")
    return build()


@pytest.fixture
def mount(binary, tmp_path):
    """mount(*args) starts lazyfs with extra args; every daemon dies in teardown."""
    made: list[Mount] = []

    def make(*args: str) -> Mount:
        m = Mount(binary, tmp_path / f"fs{len(made)}", *args)
        made.append(m)
        m.start()
        return m

    try:
        yield make
    finally:
        for m in made:
            m.kill()


@pytest.fixture
def fs(mount) -> Mount:
    return mount()




@pytest.fixture(scope="module")
def shared_fs(binary, tmp_path_factory):
    m = Mount(binary, tmp_path_factory.mktemp("lazyfs-property"))
    try:
        m.start()
        yield m
    finally:
        m.kill()


def cached_libs() -> Path | None:
    """The jars of a Kafka release `make setup` (or an earlier run) cached, 4.x first; None when there is none."""
    found = [d for d in cache_dir().glob("kafka-*") if (d / COMPLETE).exists() and any((d / "libs").glob(
        "kafka-clients-*.jar"))]
    found.sort(key=lambda d: [int(x) for x in d.name.removeprefix("kafka-").split(".") if x.isdigit()], reverse=True)
    return found[0] / "libs" if found else None


@pytest.fixture(scope="session")
def program(tmp_path_factory):
    if jdk_problem() is not None:
        pytest.skip("no JDK (java, javac) on PATH")
    libs = cached_libs()
    if libs is None:
        pytest.skip("no Kafka jars in the cache (make setup)")
    return compile_client(libs, tmp_path_factory.mktemp("java-client"))


@pytest.fixture
def refused_run(tmp_path, capsys):
    """refused_run(argv, needle): `kchaos run ARGV --store S` exits 3 with one line on stderr holding `needle`,
    and S was never created."""
    def check(argv: list[str], needle: str) -> None:
        store = tmp_path / "store"
        assert main(["run", *argv, "--store", str(store)]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
        assert not store.exists()
    return check
