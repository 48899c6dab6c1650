"""The hosts file: a good file read whole and written back, and every bad file a one-line error
naming the file, the line and the key."""
from __future__ import annotations

import getpass
from pathlib import Path

import pytest
import yaml

from kchaos.clusters.remote_ssh import SshPool, SshRemote, to_remote
from kchaos.core.config import ConfigError
from kchaos.core.hosts import ExternalKafka, Host, HostsError, HostsFile, load_hosts

GOOD = """\
# three machines
known_hosts: kh
accept_unknown_host_keys: false
nodes:
  - {name: n1, address: kafka1.example, port: 2222, user: kafka, key: id_test, sudo: true, role: both}
  - name: n2
    address: 10.0.0.2
    client_address: kafka2.public
  - {name: n-3, address: 10.0.0.3, role: controller}
  - {name: b4, address: 10.0.0.4, role: broker}
"""

EXTERNAL = """\
nodes:
  - name: k1
    address: 10.0.0.1
    kafka: external
    node_id: 1
    data_dir: /var/lib/kafka/
    commands: {start: systemctl start kafka, stop: systemctl stop kafka, kill: systemctl kill -s KILL kafka}
  - name: k2
    address: 10.0.0.2
    kafka: external
    node_id: 2
    kafka_port: 19092
    data_dir: /data
    commands:
      start: systemctl start kafka
      stop: systemctl stop kafka
      kill: systemctl kill -s KILL kafka
      pause: systemctl kill -s STOP kafka
      resume: systemctl kill -s CONT kafka
  - {name: k3, address: 10.0.0.3, kafka: external, node_id: 3, data_dir: /data,
     commands: {start: a, stop: b, kill: c}}
"""


@pytest.fixture
def d(tmp_path) -> Path:
    (tmp_path / "kh").write_text("")
    (tmp_path / "id_test").write_text("not really a key")
    return tmp_path


def write(d: Path, text: str, name: str = "hosts.yaml") -> Path:
    p = d / name
    p.write_text(text)
    return p


def test_good_file_has_every_default_filled_in(d):
    h = load_hosts(write(d, GOOD))
    me = getpass.getuser()
    assert h == HostsFile(path=d / "hosts.yaml", known_hosts=d / "kh", accept_unknown_host_keys=False, nodes=(
        Host("n1", "kafka1.example", "kafka", port=2222, key=d / "id_test", sudo=True, role="both"),
        Host("n2", "10.0.0.2", me, client_address="kafka2.public"),
        Host("n-3", "10.0.0.3", me, role="controller"),
        Host("b4", "10.0.0.4", me, role="broker"),
    ))
    assert [x.name for x in h.brokers] == ["n1", "n2", "b4"]
    assert [x.name for x in h.controllers] == ["n1", "n2", "n-3"]
    assert h.host("n2").kafka_address == "kafka2.public" and h.host("b4").kafka_address == "10.0.0.4"
    assert not h.external and h.can_pause
    with pytest.raises(KeyError):
        h.host("n9")


@pytest.mark.parametrize("text", [GOOD, EXTERNAL])
def test_round_trip_through_to_dict(d, text):
    h = load_hosts(write(d, text))
    again = load_hosts(write(d, yaml.safe_dump(h.to_dict()), "again.yaml"))
    assert again.nodes == h.nodes
    assert (again.known_hosts, again.accept_unknown_host_keys) == (h.known_hosts, h.accept_unknown_host_keys)


def test_external_kafka(d):
    h = load_hosts(write(d, EXTERNAL))
    assert h.external and not h.can_pause  # k1 and k3 have no pause command
    assert h.host("k1").external == ExternalKafka(
        start="systemctl start kafka", stop="systemctl stop kafka", kill="systemctl kill -s KILL kafka",
        node_id=1, data_dir="/var/lib/kafka", kafka_port=9092)
    k2 = h.host("k2").external
    assert (k2.kafka_port, k2.pause, k2.resume) == (19092, "systemctl kill -s STOP kafka",
                                                    "systemctl kill -s CONT kafka")


def test_home_is_expanded_and_relative_paths_follow_the_file(d, monkeypatch):
    monkeypatch.setenv("HOME", str(d))
    sub = d / "conf"
    sub.mkdir()
    h = load_hosts(write(sub, "known_hosts: ../kh\nnodes:\n  - {name: n1, address: a, key: ~/id_test}\n"))
    assert h.nodes[0].key == d / "id_test"
    assert h.known_hosts.resolve() == (d / "kh").resolve()


def test_to_remote_builds_the_transport_without_connecting(d):
    h = load_hosts(write(d, GOOD))
    r = to_remote(h.host("n1"), h, pool=SshPool())
    assert isinstance(r, SshRemote)
    assert (r.name, r.address, r.port, r.user, r.key, r.known_hosts, r.accept_unknown_host_keys) == \
        ("n1", "kafka1.example", 2222, "kafka", d / "id_test", d / "kh", False)
    default = to_remote(h.host("n2"), HostsFile(h.path, h.nodes, None, True), pool=SshPool())
    assert (default.port, default.key, default.known_hosts, default.accept_unknown_host_keys) == \
        (22, None, Path("~/.ssh/known_hosts").expanduser(), True)


N1 = "nodes:\n  - {name: n1, address: a}\n"
EXT = "  - name: n1\n    address: a\n    kafka: external\n    node_id: 1\n    data_dir: /d\n"


@pytest.mark.parametrize("text, where", [
    ("", "hosts.yaml:1: a hosts file is a mapping with keys nodes, known_hosts, accept_unknown_host_keys"),
    ("- a\n", "hosts.yaml:1: a hosts file is a mapping"),
    ("nodes: [\n", "hosts.yaml:2: not valid YAML"),
    ("known_hosts: kh\n", "hosts.yaml:1: nodes: required"),
    ("nodes: []\n", "hosts.yaml:1: nodes: must be a non-empty list of hosts, got a list"),
    ("nodes:\n  n1: a\n", "hosts.yaml:1: nodes: must be a non-empty list of hosts, got a mapping"),
    (N1 + "colour: red\n", "hosts.yaml:3: colour: unknown key; a hosts file has nodes, known_hosts,"),
    (N1 + "nodes: []\n", "hosts.yaml:3: nodes: appears twice"),
    ("nodes:\n  - n1\n", "hosts.yaml:2: nodes[0]: must be a mapping of node settings (name, address, ...), got 'n1'"),
    ("nodes:\n  - {address: a}\n", "hosts.yaml:2: nodes[0].name: required"),
    ("nodes:\n  - name: n1\n", "hosts.yaml:2: nodes[0].address: required"),
    ("nodes:\n  - {name: N1, address: a}\n", "hosts.yaml:2: nodes[0].name: must be 1-32 of a-z, 0-9 and '-', got 'N1'"),
    ("nodes:\n  - {name: " + "n" * 33 + ", address: a}\n", "hosts.yaml:2: nodes[0].name: must be 1-32"),
    ("nodes:\n  - {name: 7, address: a}\n", "hosts.yaml:2: nodes[0].name: must be 1-32 of a-z, 0-9 and '-', got 7"),
    ("nodes:\n  - {name: n1, address: ''}\n", "hosts.yaml:2: nodes[0].address: must be a non-empty string, got ''"),
    ("nodes:\n  - name: n1\n    address: a\n\n    port: x\n",
     "hosts.yaml:5: nodes[0].port: must be an integer in 1..65535, got 'x'"),
    ("nodes:\n  - {name: n1, address: a, port: 0}\n",
     "hosts.yaml:2: nodes[0].port: must be an integer in 1..65535, got 0"),
    ("nodes:\n  - {name: n1, address: a, port: 65536}\n",
     "hosts.yaml:2: nodes[0].port: must be an integer in 1..65535"),
    ("nodes:\n  - {name: n1, address: a, port: true}\n",
     "hosts.yaml:2: nodes[0].port: must be an integer in 1..65535, got True"),
    ("nodes:\n  - {name: n1, address: a, port: '22'}\n",
     "hosts.yaml:2: nodes[0].port: must be an integer in 1..65535, got '22'"),
    ("nodes:\n  - {name: n1, address: a, user: [x]}\n",
     "hosts.yaml:2: nodes[0].user: must be a non-empty string, got a list"),
    ("nodes:\n  - name: n1\n    address: a\n    key: nope\n", "hosts.yaml:4: nodes[0].key: {d}/nope does not exist"),
    ("nodes:\n  - name: n1\n    address: a\n    key: .\n", "hosts.yaml:4: nodes[0].key: {d} is not a file"),
    ("nodes:\n  - {name: n1, address: a, sudo: 'yes'}\n",
     "hosts.yaml:2: nodes[0].sudo: must be true or false, got 'yes'"),
    ("nodes:\n  - {name: n1, address: a, role: leader}\n",
     "hosts.yaml:2: nodes[0].role: must be one of broker, controller, both, got 'leader'"),
    ("nodes:\n  - {name: n1, address: a, client_address: 5}\n",
     "hosts.yaml:2: nodes[0].client_address: must be a non-empty string, got 5"),
    ("nodes:\n  - {name: n1, address: a, kafka: own}\n",
     "hosts.yaml:2: nodes[0].kafka: must be one of managed, external, got 'own'"),
    ("nodes:\n  - name: n1\n    address: a\n    hostname: b\n",
     "hosts.yaml:4: nodes[0].hostname: unknown key; a node has name, address, port,"),
    ("nodes:\n  - name: n1\n    address: a\n    port: 22\n    port: 23\n",
     "hosts.yaml:5: nodes[0].port: appears twice"),
    ("nodes:\n  - {name: n1, address: a}\n  - {name: n1, address: b}\n",
     "hosts.yaml:3: nodes[1].name: name n1 is also nodes[0]'s"),
    ("nodes:\n  - {name: n1, address: a}\n  - {name: n2, address: a, port: 22}\n",
     "hosts.yaml:3: nodes[1].address: address a:22 is also nodes[0]'s"),
    ("nodes:\n  - {name: n1, address: a, role: controller}\n", "hosts.yaml:1: nodes: no node is a broker"),
    ("nodes:\n  - {name: n1, address: a}\n  - {name: n2, address: b}\n",
     "hosts.yaml:1: nodes: 2 controllers (n1, n2): a KRaft quorum needs an odd number"),
    ("nodes:\n  - {name: n1, address: a, role: broker}\n", "hosts.yaml:1: nodes: 0 controllers: a KRaft quorum"),
    ("known_hosts: missing\n" + N1, "hosts.yaml:1: known_hosts: {d}/missing does not exist"),
    ("accept_unknown_host_keys: 1\n" + N1, "hosts.yaml:1: accept_unknown_host_keys: must be true or false, got 1"),
    ("nodes:\n  - name: n1\n    address: a\n    node_id: 1\n",
     "hosts.yaml:4: nodes[0].node_id: only for kafka: external"),
    ("nodes:\n  - name: n1\n    address: a\n    commands: {start: x}\n",
     "hosts.yaml:4: nodes[0].commands: only for kafka: external"),
    ("nodes:\n" + EXT, "hosts.yaml:2: nodes[0].commands: required for kafka: external (start, stop and kill)"),
    ("nodes:\n" + EXT.replace("    node_id: 1\n", "") + "    commands: {start: a, stop: b, kill: c}\n",
     "hosts.yaml:2: nodes[0].node_id: required for kafka: external"),
    ("nodes:\n" + EXT + "    commands: {start: a, stop: b}\n", "hosts.yaml:7: nodes[0].commands.kill: required"),
    ("nodes:\n" + EXT + "    commands: start a\n",
     "hosts.yaml:7: nodes[0].commands: must be a mapping of start, stop, kill (and pause, resume), got 'start a'"),
    ("nodes:\n" + EXT + "    commands:\n      start: a\n      stop: b\n      kill: ''\n",
     "hosts.yaml:10: nodes[0].commands.kill: must be a non-empty string, got ''"),
    ("nodes:\n" + EXT + "    commands:\n      start: a\n      stop: b\n      kill: c\n      restart: d\n",
     "hosts.yaml:11: nodes[0].commands.restart: unknown key; commands are start, stop, kill, pause, resume"),
    ("nodes:\n" + EXT + "    commands:\n      start: a\n      stop: b\n      kill: c\n      pause: d\n",
     "hosts.yaml:11: nodes[0].commands.pause: pause and resume go together; resume is missing"),
    ("nodes:\n" + EXT.replace("/d", "data") + "    commands: {start: a, stop: b, kill: c}\n",
     "hosts.yaml:6: nodes[0].data_dir: must be an absolute path (the broker's log.dirs), got 'data'"),
    ("nodes:\n" + EXT.replace("node_id: 1", "node_id: -1") + "    commands: {start: a, stop: b, kill: c}\n",
     "hosts.yaml:5: nodes[0].node_id: must be an integer in 0..2147483647, got -1"),
    ("nodes:\n" + EXT + "    kafka_port: 0\n    commands: {start: a, stop: b, kill: c}\n",
     "hosts.yaml:7: nodes[0].kafka_port: must be an integer in 1..65535, got 0"),
    ("nodes:\n" + EXT + "    commands: {start: a, stop: b, kill: c}\n"
     + EXT.replace("n1", "n2").replace("address: a", "address: b") + "    commands: {start: a, stop: b, kill: c}\n"
     + "  - {name: n3, address: c, kafka: external, node_id: 3, data_dir: /d, "
       "commands: {start: a, stop: b, kill: c}}\n",
     "hosts.yaml:11: nodes[1].node_id: node_id 1 is also nodes[0]'s"),
    ("nodes:\n" + EXT + "    commands: {start: a, stop: b, kill: c}\n  - {name: n2, address: b}\n"
     "  - {name: n3, address: c}\n", "hosts.yaml:8: nodes[1].kafka: managed, but nodes[0] is external"),
])
def test_bad_hosts_file_names_file_line_and_key(d, text, where):
    with pytest.raises(HostsError) as e:
        load_hosts(write(d, text))
    assert isinstance(e.value, ConfigError)
    msg = str(e.value)
    assert msg.startswith(where.format(d=d)), msg
    assert "\n" not in msg


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(HostsError, match=rf"^{tmp_path}/none.yaml: cannot read the hosts file: No such file"):
        load_hosts(tmp_path / "none.yaml")

