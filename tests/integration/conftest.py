"""Fixtures for tests against a real Kafka cluster in Docker containers."""
import socket
import subprocess
import sys
import time

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
    """The node image (built once, cached); fails loudly when no Docker Engine answers."""
    cleanup()
    return prepare("3.7.2")


@pytest.fixture
def store(tmp_path, node_image):
    """A fresh results store; whatever containers a test leaves are removed afterwards."""
    yield tmp_path / "results"
    cleanup()


@pytest.fixture(scope="session", autouse=True)
def warm_check(request, tmp_path_factory):
    """One `kchaos serve --warm-check` for the session, holding the root of every test's temporary directories:
    each run's check, and each `kchaos check`, of a store below it is answered on that one warm Spark, as below a
    user's served store, rather than by a Spark started for it (about 15 s of CPU each). A test that wants a run
    checked by its own Spark keeps its store elsewhere (test_versions_spine.py). A session of `beside` tests
    alone, which runs beside the cluster lane's, starts none."""
    if all(item.get_closest_marker("beside") for item in request.session.items):
        yield None
        return
    root = tmp_path_factory.getbasetemp()
    with socket.socket() as s:  # the pages' port, which no test asks for
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(root / "warm-check.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kchaos", "serve", "--warm-check", "--store", str(root),
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not answers(root / SOCKET):
            assert proc.poll() is None and time.monotonic() < deadline, (root / "warm-check.log").read_text()
            time.sleep(0.2)
        yield root
    finally:
        proc.terminate()
        proc.wait(60)
