"""Fixtures for tests against a real Kafka cluster in Docker containers."""
import pytest

from kchaos.clusters.docker import cleanup
from kchaos.harness.runner import prepare

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
