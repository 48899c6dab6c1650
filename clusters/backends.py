"""Backend registry: one line per backend. A backend turns a test's configuration into the
`Provisioner` that makes or reaches its nodes; `--hosts` picks `ssh`."""
from __future__ import annotations

from collections.abc import Callable

from kchaos.clusters.cluster import Provisioner
from kchaos.core.config import TestConfig


def _docker(cfg: TestConfig) -> Provisioner:
    from kchaos.clusters.docker import DockerProvisioner
    return DockerProvisioner(cfg.cluster)


def _ssh(cfg: TestConfig) -> Provisioner:
    from kchaos.clusters.ssh import SshProvisioner
    from kchaos.core.hosts import load_hosts
    return SshProvisioner(cfg.cluster, load_hosts(cfg.cluster.hosts or ""))


# Imported lazily by each entry: a Docker run needs no paramiko, an SSH run no Docker Engine.
BACKENDS: dict[str, Callable[[TestConfig], Provisioner]] = {
    "docker": _docker,
    "ssh": _ssh,
}
