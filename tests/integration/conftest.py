"""Fixtures for tests against a real Kafka cluster in Docker containers."""
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kchaos.clusters.docker import cleanup
from kchaos.harness.runner import prepare
from kchaos.harness.warm_check import SOCKET, answers

CLUSTER_FIXTURES = {"node_image", "store"}


def pytest_collection_modifyitems(items):
    """A `beside` test runs while another lane's cluster runs, so it may not take the fixtures whose set-up and
    clean-up remove every kchaos container."""
    for item in items:
        if item.get_closest_marker("beside") and CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            raise pytest.UsageError(f"{item.nodeid} is marked beside but uses {sorted(CLUSTER_FIXTURES)}")


@pytest.fixture(scope="session")
def node_image():
    """The node image (built once, cached); fails loudly when no Docker Engine answers. Spark's class archive is
    `make test`'s own tier, made beside: a cluster test does not wait for it."""
    cleanup()
    return prepare("3.7.2", checker=False)


@pytest.fixture
def store(tmp_path, node_image, warm_check):
    """A fresh results store, checked on the session's warm Spark (once it answers); whatever containers a test
    leaves are removed afterwards."""
    if warm_check is not None:
        warm_check.wait()
    yield tmp_path / "results"
    cleanup()


class WarmCheck:
    """A `kchaos serve --warm-check` started for the session, over `root`."""

    def __init__(self, root: Path, proc: subprocess.Popen, log: Path):
        self.root, self.proc, self.log = root, proc, log

    def wait(self, timeout: float = 120.0) -> None:
        """Return once the service answers; fail quoting its log if it exits or does not answer in time."""
        deadline = time.monotonic() + timeout
        while not answers(self.root / SOCKET):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.2)


@pytest.fixture(scope="session", autouse=True)
def warm_check(request, tmp_path_factory):
    """One `kchaos serve --warm-check` for the session, holding the root of every test's temporary directories:
    each run's check, and each `kchaos check`, of a store below it is answered on that one warm Spark, as below a
    user's served store, rather than by a Spark started for it (about 15 s of CPU each). A test that wants a run
    checked by its own Spark keeps its store elsewhere (test_versions_spine.py). A session of `beside` tests
    alone, which runs beside the cluster lane's, starts none.

    Spark warms up while the first tests run (the shared clusters' fault tests, which check no history): a test's
    `store` waits until the service answers. A run made before then in a store of a test's own is checked in a
    Spark of its own, as any run is when no service answers."""
    if all(item.get_closest_marker("beside") for item in request.session.items):
        yield None
        return
    root = tmp_path_factory.getbasetemp()
    with socket.socket() as s:  # the pages' port, which no test asks for
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = root / "warm-check.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kchaos", "serve", "--warm-check", "--store", str(root),
                                 "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield WarmCheck(root, proc, log)
    finally:
        proc.terminate()
        proc.wait(60)
