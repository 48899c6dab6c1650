"""SSH test hosts (tests/integration/ssh_hosts.py) reached the way the SSH backend will reach real
machines: the generated hosts.yaml read with core/hosts.py, one SshRemote per host with its key
checked against the generated known_hosts, and the three connection errors, each naming the host."""
from __future__ import annotations

import dataclasses
import time

import pytest
from ssh_hosts import SshHosts, keygen, ssh_hosts

from kchaos.clusters.engine import LABEL, docker_client
from kchaos.clusters.remote import AuthFailed, HostKeyUnknown, HostUnreachable
from kchaos.clusters.remote_ssh import SshPool, to_remote
from kchaos.core.hosts import load_hosts

pytestmark = pytest.mark.beside
# beside the Docker backend's 172.30.77.0/24 and the SSH backend tests' hosts, which may run at the same time
SUBNET = "172.30.80.0/24"


@pytest.fixture(scope="module")
def hosts():
    with ssh_hosts(3, subnet=SUBNET) as h:
        yield h


def test_each_host_is_its_own_machine_over_ssh(hosts: SshHosts, tmp_path):
    hf = load_hosts(hosts.hosts_file)
    assert [(h.name, h.address, h.user, h.sudo, h.role) for h in hf.nodes] == \
        [(n, hosts.addresses[n], "kafka", True, "both") for n in ("n1", "n2", "n3")]
    assert hf.known_hosts == hosts.known_hosts and not hf.accept_unknown_host_keys
    assert len({line.split()[2] for line in hosts.known_hosts.read_text().splitlines()}) == 3  # a key each
    pool = SshPool()
    try:
        for host in hf.nodes:
            r = to_remote(host, hf, pool=pool)
            assert r.run(["hostname"], timeout=10, check=True).stdout.strip() == host.name
            assert r.run(["id", "-un"], timeout=10, check=True).stdout.strip() == "kafka"
            assert r.run(["id", "-u"], timeout=10, check=True, sudo=True).stdout.strip() == "0"
            java = r.run(["java", "-version"], timeout=30, check=True)
            assert 'version "17.' in java.stderr, java.stderr
            # What the SSH backend's prerequisite check will look for, and the fault tools.
            tools = r.run("for t in iptables tc fusermount3 python3 pkill; do command -v $t || exit 1; done",
                          timeout=10, sudo=True, check=True)
            assert [p.rsplit("/", 1)[1] for p in tools.stdout.split()] == \
                ["iptables", "tc", "fusermount3", "python3", "pkill"], tools.stdout
            assert r.run("test -c /dev/fuse", timeout=10, check=True).ok
            src = tmp_path / f"{host.name}.bin"
            src.write_bytes(host.name.encode() * 1000 + bytes(range(256)))
            r.put(src, f"/tmp/{host.name}.bin", mode=0o640)
            assert r.run(["stat", "-c", "%a %U %s", f"/tmp/{host.name}.bin"], timeout=10).stdout.split() == \
                ["640", "kafka", str(src.stat().st_size)]
            back = tmp_path / f"{host.name}.back"
            r.get(f"/tmp/{host.name}.bin", back)
            assert back.read_bytes() == src.read_bytes()
            assert r.accepted_host_key is None  # every key was in known_hosts
    finally:
        pool.close_all()


def test_hosts_are_not_taken_for_a_kchaos_run(hosts: SshHosts):
    # `kchaos cleanup` and a Docker cluster's start look for io.kchaos; a container inherits its
    # image's labels, so this also checks the base image does not carry it.
    client = docker_client()
    seen = {c.name for c in client.containers.list(all=True, filters={"label": LABEL})}
    seen |= {n.name for n in client.networks.list(filters={"label": LABEL})}
    assert not seen & {*hosts.containers.values(), hosts.network}


def test_wrong_key_is_refused(hosts: SshHosts, tmp_path):
    hf = load_hosts(hosts.hosts_file)
    n1 = dataclasses.replace(hf.host("n1"), key=keygen(tmp_path / "other"))
    with pytest.raises(AuthFailed) as e:
        to_remote(n1, hf, pool=SshPool()).run(["true"], timeout=10)
    assert str(e.value) == f"n1 ({hosts.addresses['n1']}:22): login as kafka with key {tmp_path / 'other'} refused"


def test_unknown_host_key_is_refused(hosts: SshHosts, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    hf = dataclasses.replace(load_hosts(hosts.hosts_file), known_hosts=empty)
    with pytest.raises(HostKeyUnknown) as e:
        to_remote(hf.host("n2"), hf, pool=SshPool()).run(["true"], timeout=10)
    assert str(e.value).startswith(f"n2 ({hosts.addresses['n2']}:22): host key not in {empty} (ssh-ed25519 SHA256:")


def test_stopped_host_is_unreachable(hosts: SshHosts):
    hf = load_hosts(hosts.hosts_file)
    hosts.stop("n3")
    start = time.monotonic()
    with pytest.raises(HostUnreachable) as e:
        to_remote(hf.host("n3"), hf, pool=SshPool(), connect_timeout=3).run(["true"], timeout=10)
    assert str(e.value).startswith(f"n3 ({hosts.addresses['n3']}:22): unreachable"), str(e.value)
    assert time.monotonic() - start < 3 + 20  # our 3 s timeout and a loaded machine's slack, not TCP's minutes
