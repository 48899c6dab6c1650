"""Docker cluster backend: one container per Kafka node on a labelled bridge network.

Each container runs `sleep infinity` under docker-init; Kafka is a child started
and signalled with `kafka-ctl` through `docker exec`, so killing Kafka keeps the
container, its network namespace and its page cache. The node's directory in
the run directory is bind-mounted at /kchaos: server.properties and the broker
logs are written straight into the run directory and survive a killed harness.
"""
from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors

from kchaos.clusters.cluster import ClusterError, KafkaCluster, new_cluster_id
from kchaos.clusters.distribution import KafkaDist
from kchaos.clusters.engine import LABEL, docker_client
from kchaos.clusters.image import ensure_node_image, ensure_release_archive, release_archive_path
from kchaos.clusters.kafka_node import KafkaNode, NodeLayout
from kchaos.clusters.kraft import NodeSpec, layout
from kchaos.clusters.remote_docker import DockerRemote
from kchaos.core.cache import cache_dir
from kchaos.core.config import ClusterConfig

__all__ = ["DockerProvisioner", "DockerCluster", "ClusterError", "new_cluster_id", "ensure_free", "cleanup"]
log = logging.getLogger("kchaos.cluster")
NETWORK = "kchaos-net"
# Where a container sees the host's cache of formatted storage (kafka-ctl's format_storage), shared by every run.
FORMATS = "/var/cache/kchaos/formats"


class DockerProvisioner:
    """Containers kchaos-n1..nN (and c1..cK dedicated controllers) from the node image, on one labelled
    bridge network with static addresses; the node image holds Kafka and the node scripts."""

    kind = "docker"
    bind: str | None = None

    def __init__(self, cfg: ClusterConfig, *, client: docker.DockerClient | None = None, image: str | None = None):
        self.cfg = cfg
        self.client = client or docker_client()
        self.image = image
        self.specs: list[NodeSpec] = layout(cfg)

    def prepare(self, dist: KafkaDist, say: Callable[[str], None], stage: KafkaDist | None = None) -> None:
        """Build the node image for `dist`, and the class archive of `stage`'s jars staged on its nodes (both
        cached), and make sure no other kchaos cluster runs here."""
        if self.image is None:
            self.image = ensure_node_image(self.client, dist, self.cfg.base_image, say)
        if stage is not None:
            ensure_release_archive(self.client, self.image, stage, say)
        ensure_free(self.client)

    def staged_archive(self, dist: KafkaDist) -> Path | None:
        """The node image's class archive for `dist`'s staged jars, when one was made."""
        path = release_archive_path(self.image, dist) if self.image else None
        return path if path is not None and path.exists() else None

    def create(self, run_dir: Path) -> dict[str, KafkaNode]:
        """Create the network and one container per node, its run-directory folder bind-mounted at /kchaos
        (so config and logs land in the run directory as they are written)."""
        if self.image is None:
            raise ClusterError("no node image: prepare() was not called")
        ensure_free(self.client)
        self._create_network()
        with ThreadPoolExecutor(len(self.specs)) as pool:
            remotes = pool.map(lambda spec: self._create_container(spec, Path(run_dir) / "nodes" / spec.name),
                               self.specs)
            return {spec.name: KafkaNode(spec, remote) for spec, remote in zip(self.specs, remotes)}

    def _create_network(self) -> None:
        net = ipaddress.ip_network(self.cfg.subnet)
        pool = docker.types.IPAMPool(subnet=str(net), gateway=self.client_address())
        try:
            self.client.networks.create(NETWORK, driver="bridge", labels={LABEL: "1"},
                                        ipam=docker.types.IPAMConfig(pool_configs=[pool]),
                                        options={"com.docker.network.bridge.name": "kchaos0"})
        except docker.errors.APIError as e:
            raise ClusterError(f"cannot create network {NETWORK} on {self.cfg.subnet}: "
                               f"{e.explanation}; pick another --subnet or run `kchaos cleanup`") from None

    def _create_container(self, spec: NodeSpec, d: Path) -> DockerRemote:
        d.mkdir(parents=True, exist_ok=True)
        api = self.client.api
        host_config = api.create_host_config(
            init=True, cap_add=["NET_ADMIN", "SYS_ADMIN"], devices=["/dev/fuse:/dev/fuse:rwm"],
            binds={str(d.resolve()): {"bind": NodeLayout().conf, "mode": "rw"},
                   str(self._formats()): {"bind": FORMATS, "mode": "rw"}},
            security_opt=["apparmor=unconfined"], sysctls={"net.ipv4.tcp_syn_retries": "2"})
        netcfg = api.create_networking_config(
            {NETWORK: api.create_endpoint_config(ipv4_address=spec.address)})
        name = f"kchaos-{spec.name}"
        api.create_container(self.image, command=["sleep", "infinity"], name=name,
                             hostname=spec.name, labels={LABEL: "1", f"{LABEL}.node": spec.name,
                                                         f"{LABEL}.run": str(d.parent.parent)},
                             host_config=host_config, networking_config=netcfg,
                             environment=self.node_env(spec.name))
        api.start(name)
        return DockerRemote(name, client=self.client, name=spec.name)

    @staticmethod
    def _formats() -> Path:
        path = cache_dir() / "formats"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def node_env(self, node: str) -> dict[str, str]:
        """Storage and heap (also the containers' environment); the cluster adds the page-cache writeback."""
        return {"KAFKA_HEAP": "384m", "KCHAOS_STORAGE": self.cfg.storage, "KCHAOS_FORMAT_CACHE": FORMATS}

    def client_address(self) -> str:
        """The network's gateway: where this host's clients come from."""
        return str(next(ipaddress.ip_network(self.cfg.subnet).hosts()))

    def record(self) -> dict[str, Any]:
        """Nothing beyond the configuration: the containers are the image's."""
        return {}

    def set_cpu(self, node: str, share: float | None) -> None:
        """Cap `node`'s container at `share` of one core (CFS quota), or remove the cap with None."""
        try:
            c = self.client.containers.get(f"kchaos-{node}")
        except docker.errors.NotFound:
            raise ClusterError(f"{node}: container is gone") from None
        if share is None:
            c.update(cpu_quota=-1)
        else:
            c.update(cpu_period=100_000, cpu_quota=max(1000, int(share * 100_000)))

    def collect(self, node: str, dest: Path) -> None:
        """Nothing: the node's /kchaos is its folder of the run directory."""

    def destroy(self) -> None:
        """Remove this cluster's containers and network; the run directory keeps the logs. Idempotent."""
        for spec in self.specs:
            try:
                self.client.containers.get(f"kchaos-{spec.name}").remove(force=True)
            except docker.errors.NotFound:
                pass
        try:
            self.client.networks.get(NETWORK).remove()
        except docker.errors.NotFound:
            pass


def DockerCluster(cfg: ClusterConfig, image: str, run_dir: Path, *, client: docker.DockerClient | None = None,
                  say: Callable[[str], None] = log.info) -> KafkaCluster:
    """A Kafka cluster of containers from the node image `image` (which holds the distribution)."""
    return KafkaCluster(cfg, DockerProvisioner(cfg, client=client, image=image), run_dir, say=say)


def ensure_free(client: docker.DockerClient) -> None:
    """Raise ClusterError if a kchaos cluster is running; remove leftovers that are no longer running.

    Node containers run `sleep infinity`, so one that is not running was left
    by a run whose Docker Engine went away (a reboot): nothing can be using it.
    """
    stale = client.containers.list(all=True, filters={"label": LABEL})
    if stale and all(c.status in ("exited", "created", "dead") for c in stale):
        log.warning("removing leftovers of an earlier run: %s", [c.name for c in stale])
        cleanup(client)
        stale = []
    if stale:
        names = ", ".join(c.name for c in stale)
        raise ClusterError(f"kchaos containers already exist ({names}); another run is active "
                           "or a run was killed: `kchaos cleanup` removes them")


def cleanup(client: docker.DockerClient | None = None) -> dict[str, list[str]]:
    """Remove every container and network any kchaos run made, found by label; return their names."""
    client = client or docker_client()
    removed: dict[str, list[str]] = {"containers": [], "networks": []}
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        if _gone_or_going(c.remove, force=True):
            removed["containers"].append(c.name)
    for n in client.networks.list(filters={"label": LABEL}):
        if _gone_or_going(n.remove):
            removed["networks"].append(n.name)
    return removed


def _gone_or_going(remove: Callable[..., object], **kw: Any) -> bool:
    """Call `remove`; True if it removed the object. A run tearing itself down at the same moment (its
    harness was interrupted) makes the Engine answer 404 (gone) or 409 (removal already in progress)."""
    try:
        remove(**kw)
        return True
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as e:
        if e.status_code == 409:
            return False
        raise

