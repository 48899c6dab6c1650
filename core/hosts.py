"""The hosts file: the machines an SSH run tests, validated before anything connects.

    known_hosts: ~/.ssh/known_hosts      # optional; default: SSH's own
    accept_unknown_host_keys: false      # optional; true trusts a key not in known_hosts (recorded)
    dir: /var/lib/kchaos                 # optional: the one directory kchaos owns on each host
    nodes:
      - {name: n1, address: kafka1.example, port: 22, user: kafka, key: ~/.ssh/id_ed25519,
         sudo: true, role: both, client_address: 10.0.0.5}

Per node: `name` (required, unique, 1-32 of a-z, 0-9, '-'), `address` (required: where SSH
reaches it), `port` (22), `user` (the local user), `key` (a private key file; default: the SSH
agent and the user's default keys), `sudo` (false: the login must be root,
as the faults need it; true: kchaos runs its commands on the node as root through `sudo -n`,
Kafka included), `role` (broker, controller or both; default both), `client_address` (where clients
reach its Kafka; default `address`) and `kafka` (managed or external; default managed).

`kafka: managed`: kchaos installs, configures, starts and removes Kafka itself.
`kafka: external`: kchaos drives a Kafka the user already runs, and needs, on that node:
  - `commands`: shell command lines run on the host (under sudo when `sudo: true`) that
    `start`, `stop` (clean shutdown) and `kill` (SIGKILL) its Kafka; required, because these are
    what the kill and restart faults do. `pause` and `resume` (freeze and thaw the process) are
    optional and go together: without them kchaos has no way to name the user's process, so
    the pause faults are refused for the file (`HostsFile.can_pause`) instead of guessed at.
  - `node_id`: its Kafka node.id; required, because leaders and controllers are reported by id
    and a fault aimed at "the leader" must find the host.
  - `kafka_port`: the port of the listener clients use at `client_address` (default 9092): the
    workload's bootstrap servers, and the port the client partition cuts.
  - `data_dir`: its `log.dirs` (absolute, one directory); required, because the evidence of a
    loss is read from the partition logs there and the disk faults act on it.
All nodes of one file are managed or all are external: they are one cluster.

A cluster needs a broker, and an odd number of controllers (a KRaft quorum). Relative paths
(`key`, `known_hosts`) are taken from the hosts file's directory, after `~` is expanded; a key
or known_hosts file given must be a readable file. Unknown keys are errors. Every error is one
line, `hosts.yaml:4: nodes[0].port: must be an integer in 1..65535, got 'x'`, raised as
HostsError (a ConfigError: the command line exits 3).
"""
from __future__ import annotations

import getpass
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.core.config import ConfigError
from kchaos.core.yaml_doc import SpecDoc

ROLES = ("broker", "controller", "both")
KAFKA_MODES = ("managed", "external")
TOP_KEYS = ("nodes", "known_hosts", "accept_unknown_host_keys", "dir")
DEFAULT_DIR = "/var/lib/kchaos"  # the one directory kchaos owns on each managed host
EXTERNAL_KEYS = ("commands", "node_id", "kafka_port", "data_dir")
NODE_KEYS = ("name", "address", "port", "user", "key", "sudo", "role", "client_address", "kafka", *EXTERNAL_KEYS)
COMMANDS_REQUIRED = ("start", "stop", "kill")
COMMANDS_OPTIONAL = ("pause", "resume")
NAME = re.compile(r"[a-z0-9-]{1,32}")
DEFAULT_KAFKA_PORT = 9092
MAX_NODE_ID = 2**31 - 1


class HostsError(ConfigError):
    """A bad hosts file: one line, `file:line: key.path: what is wrong`."""


@dataclass(frozen=True)
class ExternalKafka:
    """A Kafka the user runs on a host, and what kchaos needs to drive it (see the module docstring).
    `pause` and `resume` are both set or both None."""
    start: str
    stop: str
    kill: str
    node_id: int
    data_dir: str
    kafka_port: int = DEFAULT_KAFKA_PORT
    pause: str | None = None
    resume: str | None = None


@dataclass(frozen=True)
class Host:
    """One machine of the hosts file, with every default filled in; `key` is an absolute path that
    existed when the file was read, or None for the agent and default keys."""
    name: str
    address: str
    user: str
    port: int = 22
    key: Path | None = None
    sudo: bool = False
    role: str = "both"
    client_address: str | None = None
    external: ExternalKafka | None = None

    @property
    def is_broker(self) -> bool:
        """Whether the node serves clients (role broker or both)."""
        return self.role in ("broker", "both")

    @property
    def is_controller(self) -> bool:
        """Whether the node votes in the KRaft quorum (role controller or both)."""
        return self.role in ("controller", "both")

    @property
    def kafka_address(self) -> str:
        """Where clients reach this node's Kafka: `client_address`, else `address`."""
        return self.client_address or self.address


@dataclass(frozen=True)
class HostsFile:
    """A validated hosts file: at least one broker, an odd number of controllers, unique names,
    node ids and (address, port) pairs, all nodes managed or all external. `path` is the file read
    (absolute); `known_hosts` None means SSH's default."""
    path: Path
    nodes: tuple[Host, ...]
    known_hosts: Path | None = None
    accept_unknown_host_keys: bool = False
    dir: str = DEFAULT_DIR

    @property
    def external(self) -> bool:
        """Whether the nodes run the user's own Kafka (`kafka: external`)."""
        return self.nodes[0].external is not None

    @property
    def can_pause(self) -> bool:
        """Whether every node's Kafka can be paused: always when managed, with pause and resume
        commands when external."""
        return all(h.external is None or h.external.pause is not None for h in self.nodes)

    @property
    def brokers(self) -> tuple[Host, ...]:
        """The nodes with role broker or both, in file order."""
        return tuple(h for h in self.nodes if h.is_broker)

    @property
    def controllers(self) -> tuple[Host, ...]:
        """The nodes with role controller or both, in file order."""
        return tuple(h for h in self.nodes if h.is_controller)

    def host(self, name: str) -> Host:
        """The node called `name`; KeyError if there is none."""
        for h in self.nodes:
            if h.name == name:
                return h
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The file as plain data with every default written out and paths absolute: what test.json
        records, and a hosts file that loads back to an equal HostsFile."""
        nodes = []
        for h in self.nodes:
            d: dict[str, Any] = {"name": h.name, "address": h.address, "port": h.port, "user": h.user,
                                 "sudo": h.sudo, "role": h.role}
            if h.key is not None:
                d["key"] = str(h.key)
            if h.client_address is not None:
                d["client_address"] = h.client_address
            x = h.external
            if x is None:
                d["kafka"] = "managed"
            else:
                cmds = {"start": x.start, "stop": x.stop, "kill": x.kill}
                if x.pause is not None and x.resume is not None:
                    cmds.update(pause=x.pause, resume=x.resume)
                d.update(kafka="external", commands=cmds, node_id=x.node_id, kafka_port=x.kafka_port,
                         data_dir=x.data_dir)
            nodes.append(d)
        out: dict[str, Any] = {"nodes": nodes, "accept_unknown_host_keys": self.accept_unknown_host_keys,
                               "dir": self.dir}
        if self.known_hosts is not None:
            out["known_hosts"] = str(self.known_hosts)
        return out


def load_hosts(path: Path | str) -> HostsFile:
    """Read and validate the hosts file at `path`; raise HostsError (one line) on anything wrong."""
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise HostsError(f"{path}: cannot read the hosts file: {getattr(e, 'strerror', None) or e}") from None
    return parse_hosts(text, path)


def parse_hosts(text: str, path: Path) -> HostsFile:
    """Validate hosts-file `text` that came from `path` (its name is used in messages; relative key
    and known_hosts paths are taken from its directory)."""
    path = Path(path).absolute()
    doc = SpecDoc(path, text, HostsError)
    d = doc.data
    if not isinstance(d, dict):
        doc.fail((), "a hosts file is a mapping with keys " + ", ".join(TOP_KEYS))
    _only(doc, (), d, TOP_KEYS, "a hosts file has")
    if "nodes" not in d:
        doc.fail(("nodes",), "required: the list of hosts")
    raw_nodes = d["nodes"]
    if not isinstance(raw_nodes, list) or not raw_nodes:
        doc.fail(("nodes",), f"must be a non-empty list of hosts, got {_show(raw_nodes)}")
    here = path.parent
    known_hosts = None
    if d.get("known_hosts") is not None:
        known_hosts = _file(doc, ("known_hosts",), d["known_hosts"], here)
    accept = _bool(doc, ("accept_unknown_host_keys",), d.get("accept_unknown_host_keys", False))
    owned = _text(doc, ("dir",), d.get("dir", DEFAULT_DIR))
    if not owned.startswith("/") or owned.rstrip("/").count("/") < 2 or ".." in owned.split("/"):
        doc.fail(("dir",), f"must be an absolute path at least two levels deep (kchaos removes it), got {_show(owned)}")
    nodes = tuple(_host(doc, i, n, here) for i, n in enumerate(raw_nodes))
    _check_cluster(doc, nodes)
    return HostsFile(path, nodes, known_hosts, accept, owned.rstrip("/"))


def _host(doc: SpecDoc, i: int, n: Any, here: Path) -> Host:
    at = ("nodes", i)
    if not isinstance(n, dict):
        doc.fail(at, f"must be a mapping of node settings (name, address, ...), got {_show(n)}")
    _only(doc, at, n, NODE_KEYS, "a node has")
    for req in ("name", "address"):
        if req not in n:
            doc.fail(at + (req,), "required")
    name = n["name"]
    if not isinstance(name, str) or not NAME.fullmatch(name):
        doc.fail(at + ("name",), f"must be 1-32 of a-z, 0-9 and '-', got {_show(name)}")
    address = _text(doc, at + ("address",), n["address"])
    port = _int(doc, at + ("port",), n.get("port", 22), 1, 65535)
    user = _text(doc, at + ("user",), n["user"]) if n.get("user") is not None else getpass.getuser()
    key = _file(doc, at + ("key",), n["key"], here) if n.get("key") is not None else None
    sudo = _bool(doc, at + ("sudo",), n.get("sudo", False))
    role = _choice(doc, at + ("role",), n.get("role", "both"), ROLES)
    client = _text(doc, at + ("client_address",), n["client_address"]) if n.get("client_address") is not None else None
    mode = _choice(doc, at + ("kafka",), n.get("kafka", "managed"), KAFKA_MODES)
    external = _external(doc, at, n) if mode == "external" else None
    if external is None:
        for k in EXTERNAL_KEYS:
            if k in n:
                doc.fail(at + (k,), "only for kafka: external (a managed Kafka is set up by kchaos)")
    return Host(name=name, address=address, user=user, port=port, key=key, sudo=sudo, role=role,
                client_address=client, external=external)


def _external(doc: SpecDoc, at: tuple, n: dict) -> ExternalKafka:
    for req in ("commands", "node_id", "data_dir"):
        if req not in n:
            doc.fail(at + (req,), "required for kafka: external"
                     + (" (start, stop and kill)" if req == "commands" else ""))
    cmds = n["commands"]
    where = at + ("commands",)
    if not isinstance(cmds, dict):
        doc.fail(where, f"must be a mapping of start, stop, kill (and pause, resume), got {_show(cmds)}")
    _only(doc, where, cmds, COMMANDS_REQUIRED + COMMANDS_OPTIONAL, "commands are")
    for req in COMMANDS_REQUIRED:
        if req not in cmds:
            doc.fail(where + (req,), "required")
    c = {k: _text(doc, where + (k,), v) for k, v in cmds.items()}
    if ("pause" in c) != ("resume" in c):
        given, missing = ("pause", "resume") if "pause" in c else ("resume", "pause")
        doc.fail(where + (given,), f"pause and resume go together; {missing} is missing")
    data_dir = _text(doc, at + ("data_dir",), n["data_dir"])
    if not data_dir.startswith("/"):
        doc.fail(at + ("data_dir",), f"must be an absolute path (the broker's log.dirs), got {_show(data_dir)}")
    return ExternalKafka(start=c["start"], stop=c["stop"], kill=c["kill"], pause=c.get("pause"),
                         resume=c.get("resume"), data_dir=data_dir.rstrip("/") or "/",
                         node_id=_int(doc, at + ("node_id",), n["node_id"], 0, MAX_NODE_ID),
                         kafka_port=_int(doc, at + ("kafka_port",), n.get("kafka_port", DEFAULT_KAFKA_PORT), 1, 65535))


def _check_cluster(doc: SpecDoc, nodes: tuple[Host, ...]) -> None:
    def first(key: Callable[[Host], Any], what: str, field: str) -> None:
        seen: dict[Any, int] = {}
        for i, h in enumerate(nodes):
            k = key(h)
            if k in seen:
                doc.fail(("nodes", i, field), f"{what} {k if isinstance(k, str) else _pair(k)} "
                                              f"is also nodes[{seen[k]}]'s")
            seen[k] = i

    first(lambda h: h.name, "name", "name")
    # Faults act on a whole machine (its firewall, its processes): two nodes on one would share them.
    first(lambda h: (h.address, h.port), "address", "address")
    modes = {i: h.external is not None for i, h in enumerate(nodes)}
    for i, ext in modes.items():
        if ext != modes[0]:
            doc.fail(("nodes", i, "kafka"), f"{'external' if ext else 'managed'}, but nodes[0] is "
                     f"{'external' if modes[0] else 'managed'}: the nodes of one file are one cluster")
    if modes[0]:
        first(lambda h: h.external.node_id, "node_id", "node_id")  # type: ignore[union-attr]
    if not any(h.is_broker for h in nodes):
        doc.fail(("nodes",), "no node is a broker (role broker or both)")
    ctl = [h.name for h in nodes if h.is_controller]
    if len(ctl) % 2 == 0:
        doc.fail(("nodes",), f"{len(ctl)} controllers{' (' + ', '.join(ctl) + ')' if ctl else ''}: "
                             "a KRaft quorum needs an odd number (role controller or both)")


def _pair(k: Any) -> str:
    if isinstance(k, tuple):
        return f"{k[0]}:{k[1]}"
    return str(k)


def _only(doc: SpecDoc, at: tuple, d: dict, keys: tuple[str, ...], what: str) -> None:
    for k in d:
        if k not in keys:
            doc.fail(at + (str(k),), f"unknown key; {what} {', '.join(keys)}")


def _show(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return "a mapping" if isinstance(v, dict) else "a list"
    return "nothing" if v is None else repr(v)


def _text(doc: SpecDoc, at: tuple, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        doc.fail(at, f"must be a non-empty string, got {_show(v)}")
    return v


def _int(doc: SpecDoc, at: tuple, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        doc.fail(at, f"must be an integer in {lo}..{hi}, got {_show(v)}")
    return v


def _bool(doc: SpecDoc, at: tuple, v: Any) -> bool:
    if not isinstance(v, bool):
        doc.fail(at, f"must be true or false, got {_show(v)}")
    return v


def _choice(doc: SpecDoc, at: tuple, v: Any, choices: tuple[str, ...]) -> str:
    if v not in choices:
        doc.fail(at, f"must be one of {', '.join(choices)}, got {_show(v)}")
    return v


def _file(doc: SpecDoc, at: tuple, v: Any, here: Path) -> Path:
    p = (here / Path(_text(doc, at, v)).expanduser()).absolute()
    if not p.exists():
        doc.fail(at, f"{p} does not exist")
    if not p.is_file():
        doc.fail(at, f"{p} is not a file")
    if not os.access(p, os.R_OK):
        doc.fail(at, f"{p} is not readable")
    return p
