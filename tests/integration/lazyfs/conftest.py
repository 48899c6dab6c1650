"""One real cluster on lazyfs for every test of this folder (the process, network, slow and disk faults): each
test heals what it broke and waits for a fully in-sync topic before the next one starts. The cluster is made once
for the folder, and torn down before any other test starts a cluster of its own."""
import pytest
from shared_cluster import LAZYFS, topic_cluster


@pytest.fixture(scope="package")
def cluster(node_image, tmp_path_factory):
    """The folder's cluster: three nodes on lazyfs, the default topic created and in sync."""
    with topic_cluster(node_image, tmp_path_factory.mktemp("lazyfs"), LAZYFS) as c:
        yield c
