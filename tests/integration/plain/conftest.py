"""One real cluster on plain storage for every test of this folder (the clock and corrupt faults): each test heals
what it broke and waits for fully in-sync topics before the next one starts. The cluster is made once for the
folder, and torn down before any other test starts a cluster of its own."""
import pytest
from shared_cluster import PLAIN, topic_cluster


@pytest.fixture(scope="package")
def cluster(node_image, tmp_path_factory):
    """The folder's cluster: three nodes on plain storage under libfaketime, the default topic created and in
    sync."""
    with topic_cluster(node_image, tmp_path_factory.mktemp("plain"), PLAIN) as c:
        yield c
