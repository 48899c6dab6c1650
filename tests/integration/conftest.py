"""Fixtures for tests against a real Kafka cluster in Docker containers."""
import fcntl
import os

import pytest

from clusters.docker import cleanup
from harness.runner import prepare

# LEAD: this machine is shared by several agents; integration tests wait for the one Docker lock here.
# Do not commit this block.
# Under `flock /tmp/kchaos-cluster.lock pytest ...` the lock is already ours (an inherited descriptor): skip.
if not any(os.path.realpath(f"/proc/self/fd/{fd}") == "/tmp/kchaos-cluster.lock" for fd in os.listdir("/proc/self/fd")):
    _LOCK = open("/tmp/kchaos-cluster.lock", "a")
    fcntl.flock(_LOCK, fcntl.LOCK_EX)


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
