"""One real cluster shared by the tests of a module or folder (the fault tests), and the heal that runs after each
test."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kchaos import nemesis
from kchaos.clusters import admin
from kchaos.clusters.docker import DockerCluster, cleanup
from kchaos.core.config import ClusterConfig, TestConfig, TopicConfig

# The configuration of the cluster the tests in lazyfs/ share: lazyfs storage, the default topic, and a killed or
# paused broker fenced after 3 s rather than Kafka's 9: a restarted broker's registration is refused until its old
# session expires, so each heal after a kill waited out the 9 s, and no test here measures that wait. A follower
# leaves the ISR after 5 s behind rather than kchaos's 10 s: the stall, slow and partition tests wait for that.
LAZYFS = TestConfig(topic=TopicConfig(), cluster=ClusterConfig(storage="lazyfs", broker_session_timeout_ms=3000,
                                                               replica_lag_time_max_ms=5000))
# The configuration of the cluster the tests in plain/ share: plain storage (the corrupt fault flips bits in the
# node's own files), every Kafka under libfaketime (the clock faults; at a zero offset otherwise), and a killed
# broker fenced after 3 s, as above.
PLAIN = TestConfig(topic=TopicConfig(), cluster=ClusterConfig(storage="plain", faketime=True,
                                                              broker_session_timeout_ms=3000))


@contextmanager
def topic_cluster(node_image: str, where: Path, cfg: TestConfig) -> Iterator[DockerCluster]:
    """A Docker cluster of `cfg.cluster` with `cfg.topic` created and in sync; torn down (and every kchaos
    container removed) when the block ends."""
    c = DockerCluster(cfg.cluster, node_image, where)
    c.setup()
    try:
        admin.create_topic(c.bootstrap(), cfg.topic)
        c.wait_topic(cfg.topic.name, 3)
        yield c
    finally:
        c.teardown()
        cleanup()


def heal(cluster: DockerCluster, cfg: TestConfig, names: Iterable[str], topics: Iterable[str] = ()) -> None:
    """Undo every fault of the nemeses `names` (each owns its undo), restore the nodes, and wait until every
    broker is back, `cfg.topic` and `topics` are fully in sync again, and the KRaft controllers agree on one
    leader (a fault that cut the active controller off leaves an election that may outlast the brokers' return,
    and the next test may aim at the controller)."""
    for name in names:
        nemesis.split(name)[0].make(cluster, cfg).teardown()
    cluster.restore()
    cluster.wait_brokers(90)
    for t in (cfg.topic.name, *topics):
        cluster.wait_topic(t, 3, 90)
    cluster.wait_quorum(90)


def until(check: Callable[[], object], timeout: float, what: str, every: float = 1.0) -> None:
    """Call `check` every `every` seconds until it returns something true; fail naming `what` and the last
    error after `timeout` seconds."""
    last = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
            last = "false"
        except Exception as e:
            last = repr(e)
        time.sleep(every)
    pytest.fail(f"{what} not within {timeout}s (last: {last})")
