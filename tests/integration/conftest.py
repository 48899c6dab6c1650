"""Fixtures for tests against a real Kafka cluster in Docker containers."""
import pytest

from kchaos.clusters.docker import cleanup
from kchaos.harness.runner import prepare


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
