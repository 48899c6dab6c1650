"""SSH test hosts: containers of the project's base image running sshd, each at its own
address on a network the test creates. Once they are up the harness reaches them only over SSH, with
a client key and a known_hosts file made here.

    with ssh_hosts(3) as hosts:
        hf = load_hosts(hosts.hosts_file)     # nodes n1..n3 at <subnet>.11.. as `kafka` with sudo

Each container is the base image (`kchaos-base:<hash>`: Debian 12 with Java 17, iproute2, iptables,
procps, python3, fuse3, openssh-server, sudo; no Kafka, which the SSH backend uploads itself), with
the capabilities and devices of a Docker node (clusters/docker.py: NET_ADMIN for iptables and tc,
SYS_ADMIN and /dev/fuse for lazyfs, apparmor unconfined), running `sshd -D -e` under docker-init.
Its host key is made here, per host: the image ships none.

Resources carry the label `io.kchaos.test=ssh-hosts`, not `io.kchaos` (nor do they inherit it: the
images are labelled `io.kchaos.image`). `kchaos cleanup`, and the check a Docker cluster makes before
it starts (`ensure_free`), look only at `io.kchaos`, so a Docker cluster can run beside SSH hosts and
neither removes the other's containers. Leftovers of a test process that died (SIGKILL) are removed
by the next `ssh_hosts`: each resource records its creator's pid.
"""
from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import yaml

from kchaos.clusters.engine import docker_client
from kchaos.clusters.image import ensure_base

TEST_LABEL = "io.kchaos.test"
KIND = "ssh-hosts"
SUBNET = "172.30.78.0/24"  # the Docker backend's default is 172.30.77.0/24
FIRST_HOST = 11
SSHD_CONFIG = """\
# kchaos SSH test host: keys only, host key made by the test
Port 22
ListenAddress 0.0.0.0
HostKey /etc/ssh/ssh_host_ed25519_key
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
# Debian's PAM stack fails in a container (pam_loginuid cannot write /proc/self/loginuid).
UsePAM no
Subsystem sftp internal-sftp
"""


@dataclass(frozen=True)
class SshHosts:
    """Running SSH test hosts: `hosts_file` (core/hosts.py format) lists them; `key` is the client
    private key every host accepts for `user`; `known_hosts` has every host's key. `containers` and
    `addresses` map node names to container names and IP addresses."""
    dir: Path
    hosts_file: Path
    known_hosts: Path
    key: Path
    user: str
    addresses: dict[str, str]
    containers: dict[str, str]
    network: str

    def stop(self, name: str) -> None:
        """Stop the host's container (it stays, so teardown still finds it): its address stops answering."""
        docker_client().containers.get(self.containers[name]).stop(timeout=2)


def keygen(path: Path, comment: str = "kchaos-test") -> Path:
    """A fresh ed25519 key pair without passphrase at `path` and `path`.pub; returns `path`."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)
    return path


@contextlib.contextmanager
def ssh_hosts(n: int = 3, *, user: str = "kafka", subnet: str = SUBNET,
              ready_timeout: float = 30.0) -> Iterator[SshHosts]:
    """Start `n` SSH hosts n1..nN and yield them; remove their containers and network on exit.

    `user` is the login: root, or another user that is created with passwordless sudo (the hosts
    file then says `sudo: true`). Roles: every host `both`, except the last a `broker` when `n` is
    even (a KRaft quorum is odd)."""
    client = docker_client()
    remove_leftovers(client)
    image = ensure_base(client)  # made only on a machine that never made it
    owner = {TEST_LABEL: KIND, f"{TEST_LABEL}.pid": str(os.getpid())}
    net = ipaddress.ip_network(subnet)
    hosts = list(net.hosts())
    names = [f"n{i}" for i in range(1, n + 1)]
    addresses = {name: str(hosts[FIRST_HOST - 1 + i]) for i, name in enumerate(names)}
    network = f"kchaos-ssh-{os.getpid()}"
    containers = {name: f"{network}-{name}" for name in names}
    with tempfile.TemporaryDirectory(prefix="kchaos-ssh-") as tmp:
        d = Path(tmp)
        try:
            pool = docker.types.IPAMPool(subnet=str(net), gateway=str(hosts[0]))
            client.networks.create(network, driver="bridge", labels=owner,
                                   ipam=docker.types.IPAMConfig(pool_configs=[pool]))
            key = keygen(d / "id_ed25519")
            lines = []
            for name in names:
                host_key = keygen(d / f"{name}_host_ed25519", f"root@{name}")
                _start(client, image, network, containers[name], name, addresses[name], owner,
                       _files(host_key, key, user))
                kind, blob = host_key.with_suffix(".pub").read_text().split()[:2]
                lines.append(f"{addresses[name]} {kind} {blob}\n")
            known_hosts = d / "known_hosts"
            known_hosts.write_text("".join(lines))
            for name in names:
                if user != "root":
                    _exec(client, containers[name], ["sh", "-c", _ADD_USER.format(user=user)])
                _wait_ssh(addresses[name], ready_timeout, client, containers[name])
            hosts_file = d / "hosts.yaml"
            nodes = [{"name": name, "address": addresses[name], "user": user, "key": str(key),
                      "sudo": user != "root", "role": "broker" if n % 2 == 0 and i == n - 1 else "both"}
                     for i, name in enumerate(names)]
            hosts_file.write_text(yaml.safe_dump({"known_hosts": str(known_hosts), "nodes": nodes},
                                                 sort_keys=False))
            yield SshHosts(d, hosts_file, known_hosts, key, user, addresses, containers, network)
        finally:
            _remove(client, list(containers.values()), network)


_ADD_USER = ("useradd --create-home --shell /bin/bash --password '*' {user} && "
             "install -d -m 700 -o {user} -g {user} /home/{user}/.ssh && "
             "install -m 600 -o {user} -g {user} /root/.ssh/authorized_keys /home/{user}/.ssh/ && "
             "echo '{user} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/kchaos && chmod 440 /etc/sudoers.d/kchaos")


def _files(host_key: Path, client_key: Path, user: str) -> bytes:
    """A tar of what sshd needs: its config, its host key, the client's public key for root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(path: str, data: bytes, mode: int) -> None:
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

        def mkdir(path: str, mode: int) -> None:
            info = tarfile.TarInfo(path)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        add("etc/ssh/sshd_config", SSHD_CONFIG.encode(), 0o644)
        add("etc/ssh/ssh_host_ed25519_key", host_key.read_bytes(), 0o600)
        add("etc/ssh/ssh_host_ed25519_key.pub", host_key.with_suffix(".pub").read_bytes(), 0o644)
        mkdir("root/.ssh", 0o700)
        add("root/.ssh/authorized_keys", client_key.with_suffix(".pub").read_bytes(), 0o600)
        mkdir("run/sshd", 0o755)  # sshd's privilege separation directory
    return buf.getvalue()


def _start(client: docker.DockerClient, image: str, network: str, container: str, hostname: str,
           address: str, labels: dict[str, str], files: bytes) -> None:
    api = client.api
    host_config = api.create_host_config(
        init=True, cap_add=["NET_ADMIN", "SYS_ADMIN"], devices=["/dev/fuse:/dev/fuse:rwm"],
        security_opt=["apparmor=unconfined"], sysctls={"net.ipv4.tcp_syn_retries": "2"})
    netcfg = api.create_networking_config({network: api.create_endpoint_config(ipv4_address=address)})
    api.create_container(image, command=["/usr/sbin/sshd", "-D", "-e"], name=container, hostname=hostname,
                         labels={**labels, f"{TEST_LABEL}.node": hostname}, host_config=host_config,
                         networking_config=netcfg)
    if not api.put_archive(container, "/", files):
        raise RuntimeError(f"{container}: could not copy sshd's files in")
    api.start(container)


def _exec(client: docker.DockerClient, container: str, argv: list[str]) -> None:
    code, out = client.containers.get(container).exec_run(argv)
    if code != 0:
        raise RuntimeError(f"{container}: {argv} exited {code}: {out.decode(errors='replace').strip()}")


def _wait_ssh(address: str, timeout: float, client: docker.DockerClient, container: str) -> None:
    """Wait until `address`:22 sends an SSH banner."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, 22), timeout=1) as s:
                s.settimeout(2)
                if s.recv(64).startswith(b"SSH-2.0-"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            c = client.containers.get(container)
            raise RuntimeError(f"{container}: no sshd on {address}:22 after {timeout:g}s ({c.status}): "
                               f"{c.logs(tail=5).decode(errors='replace').strip()}")
        time.sleep(0.1)


def _remove(client: docker.DockerClient, containers: list[str], network: str | None) -> None:
    for name in containers:
        with contextlib.suppress(docker.errors.NotFound):
            client.containers.get(name).remove(force=True)
    if network is not None:
        with contextlib.suppress(docker.errors.NotFound):
            client.networks.get(network).remove()


def remove_leftovers(client: docker.DockerClient | None = None) -> list[str]:
    """Remove SSH test hosts and networks whose creating process is gone; return their names."""
    client = client or docker_client()
    mine = {"label": f"{TEST_LABEL}={KIND}"}
    dead = [c for c in client.containers.list(all=True, filters=mine) if not _alive(c.labels)]
    nets = [nw for nw in client.networks.list(filters=mine) if not _alive(nw.attrs.get("Labels") or {})]
    _remove(client, [c.name for c in dead], None)
    for nw in nets:
        with contextlib.suppress(docker.errors.NotFound):
            nw.remove()
    return [c.name for c in dead] + [nw.name for nw in nets]


def _alive(labels: dict[str, str]) -> bool:
    try:
        pid = int(labels.get(f"{TEST_LABEL}.pid", ""))
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
