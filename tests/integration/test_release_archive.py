"""The class archive of a release that a rolling upgrade stages on a Docker node: made once for the node image and
the release's jars where staging puts them, it serves a JVM started on jars staged as a run stages them."""
import pytest

from kchaos.clusters.distribution import resolve
from kchaos.clusters.engine import docker_client
from kchaos.clusters.image import ensure_node_image, ensure_release_archive, release_archive_path
from kchaos.clusters.kafka_node import KafkaNode
from kchaos.clusters.kraft import NodeSpec
from kchaos.clusters.remote_docker import DockerRemote
from kchaos.core.kafka_versions import LINES, scripts_env

pytestmark = pytest.mark.beside


def test_a_release_staged_on_a_node_starts_from_the_archive_made_for_it():
    client = docker_client()
    old, new = resolve(LINES[0].latest), resolve(LINES[-1].latest)
    image = ensure_node_image(client, old)
    archive = ensure_release_archive(client, image, new)
    assert archive == release_archive_path(image, new) and archive.stat().st_size > 1_000_000
    assert ensure_release_archive(client, image, new, say=pytest.fail) == archive  # made once: cached after
    # Not labelled io.kchaos (a run would take it for another run's cluster); it removes itself when `sleep` ends.
    c = client.containers.run(image, ["sleep", "600"], detach=True, auto_remove=True, network_mode="none",
                              labels={"io.kchaos.test": "release-archive"})
    try:
        node = KafkaNode(NodeSpec("n1", 1, "127.0.0.1", ("broker", "controller")), DockerRemote(c, name="n1"))
        libs = node.install_libs(new, archive)  # as a run's stage_release does, then use_release
        node.use_libs(libs, {"KAFKA_HEAP": "384m", **scripts_env(new.version)})
        # -Xshare:on: the JVM refuses to start unless the archive maps and matches these jars, in this order
        code, out = node.exec([f"{node.layout.bin}/kafka-ctl", "tool", "-Xshare:on", "kafka.Kafka", "--version"])
        assert code == 0 and new.version in out, out[-2000:]
        # the control: the jars of the image's own release do not match it, and the JVM says so
        code, out = node.exec(["java", "-Xshare:on", f"-XX:SharedArchiveFile={node.layout.archive_for(new)}", "-cp",
                               f"{node.layout.libs}/*", "kafka.Kafka", "--version"])
        assert code != 0, out[-2000:]
    finally:
        c.remove(force=True)
