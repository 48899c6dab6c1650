"""KRaft cluster layout: node names, ids, addresses and each node's server.properties."""
from __future__ import annotations

import base64
import ipaddress
import re
import uuid
from dataclasses import dataclass

from kchaos.core.config import ClusterConfig, share_groups_on

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
DATA_DIR = "/var/lib/kafka/data"
# The raft client's lines about its voter set and its log's truncations (KRaftControlRecordStateMachine,
# KafkaRaftClient): what `voter_set_lost` reads.
VOTER_LINES = "Latest set of voters is|Truncated to offset"
_VOTERS = re.compile(r"Latest set of voters is .* at offset (\d+) \(")
_TRUNCATED = re.compile(r"Truncated to offset (\d+) from Fetch response from leader (-?\d+)")


@dataclass(frozen=True)
class NodeSpec:
    """One node of the cluster: a broker, a controller, or both (combined mode)."""

    name: str
    node_id: int
    address: str
    roles: tuple[str, ...]
    port: int = BROKER_PORT  # the broker listener clients and followers use

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


def layout(cfg: ClusterConfig) -> list[NodeSpec]:
    """Nodes n1..nN (brokers; also controllers in combined mode), the spares n(N+1).. (brokers only: never voters) and
    c1..cK (dedicated controllers).

    Addresses are static: n<i> gets host 10+i of the subnet (.11 to .19), c<i> host 20+i.
    """
    hosts = list(ipaddress.ip_network(cfg.subnet).hosts())
    combined = cfg.controllers == 0
    roles = ("broker", "controller") if combined else ("broker",)
    specs = [NodeSpec(f"n{i}", i, str(hosts[9 + i]), roles if i <= cfg.nodes else ("broker",))
             for i in range(1, cfg.nodes + cfg.spares + 1)]
    specs += [NodeSpec(f"c{i}", 100 + i, str(hosts[19 + i]), ("controller",)) for i in range(1, cfg.controllers + 1)]
    return specs


def server_properties(spec: NodeSpec, specs: list[NodeSpec], cfg: ClusterConfig, *, data_dir: str = DATA_DIR,
                      bind: str | None = None) -> str:
    """The server.properties of `spec`, for a cluster of `specs` configured by `cfg`, with its log
    directory at `data_dir`. Listeners bind to the node's address, or to `bind` (0.0.0.0 on a host
    whose Kafka address is not its own, behind a NAT)."""
    here = bind or spec.address
    voters = ",".join(f"{s.node_id}@{s.address}:{CONTROLLER_PORT}" for s in specs if s.is_controller)
    quorum = ({"controller.quorum.bootstrap.servers": ",".join(f"{s.address}:{CONTROLLER_PORT}" for s in specs
                                                                if s.is_controller)}
              if cfg.dynamic_quorum else {"controller.quorum.voters": voters})
    brokers = cfg.nodes  # the internal topics' replication as without spares, which join later
    listeners = []
    if spec.is_broker:
        listeners.append(f"PLAINTEXT://{here}:{BROKER_PORT}")
    if spec.is_controller:
        listeners.append(f"CONTROLLER://{here}:{CONTROLLER_PORT}")
    props = {
        "process.roles": ",".join(spec.roles),
        "node.id": spec.node_id,
        **quorum,
        "listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": data_dir,
    }
    if spec.is_broker:
        props |= {
            "advertised.listeners": f"PLAINTEXT://{spec.address}:{BROKER_PORT}",
            "inter.broker.listener.name": "PLAINTEXT",
            "num.partitions": 1,
            "default.replication.factor": min(3, brokers),
            "offsets.topic.replication.factor": min(3, brokers),
            "offsets.topic.num.partitions": 3,
            "transaction.state.log.replication.factor": min(3, brokers),
            "transaction.state.log.min.isr": min(2, brokers),
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": 0,
            "replica.lag.time.max.ms": cfg.replica_lag_time_max_ms,
            "broker.session.timeout.ms": cfg.broker_session_timeout_ms,
            "broker.heartbeat.interval.ms": min(2000, cfg.broker_session_timeout_ms // 3),
            # Keep every record for the final read: no time- or size-based deletion during a test.
            "log.retention.ms": -1,
            "log.retention.bytes": -1,
            "num.network.threads": 2,
            "num.io.threads": 4,
        }
        if share_groups_on(cfg):
            props |= {
                # The share coordinator's state topic sized like the other internal topics (Kafka's default is 50
                # partitions), and a group's acquisition lock allowed down to a second for short runs.
                "share.coordinator.state.topic.num.partitions": 3,
                "share.coordinator.state.topic.replication.factor": min(3, brokers),
                "share.coordinator.state.topic.min.isr": min(2, brokers),
                "group.share.min.record.lock.duration.ms": 1000,
            }
    if spec.is_controller:
        props["broker.session.timeout.ms"] = cfg.broker_session_timeout_ms
    return "".join(f"{k}={v}\n" for k, v in props.items())


def directory_id(spec: NodeSpec) -> str:
    """The log directory id a node's storage is formatted with under a dynamic quorum: a Kafka Uuid (URL-safe base64,
    no padding) fixed by the node's name, so that formatted storage stays cacheable."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"kchaos:{spec.name}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def format_args(spec: NodeSpec, specs: list[NodeSpec], cfg: ClusterConfig) -> tuple[str, ...]:
    """What the storage tool needs beyond the cluster id for `spec`: under a dynamic quorum, the initial voters with
    their directory ids (for a controller), or that it is none of them (a broker); nothing under a static one."""
    if not cfg.dynamic_quorum:
        return ()
    if not spec.is_controller:
        return ("--no-initial-controllers",)
    return ("--initial-controllers", ",".join(f"{s.node_id}@{s.address}:{CONTROLLER_PORT}:{directory_id(s)}"
                                              for s in specs if s.is_controller))


def voter_set_lost(lines: str) -> str | None:
    """Why a node knows no controller, when its server.log `lines` (those matching VOTER_LINES suffice) show Kafka's
    loss of the voter set in a dynamic quorum: its raft client read a voter set at some offset, truncated the
    metadata log to that offset or below, and never read one again (findings/brokers-lose-the-voter-set.md).
    None when they do not."""
    read: int | None = None
    cut: tuple[int, int] | None = None
    for line in lines.splitlines():
        if m := _VOTERS.search(line):
            read, cut = int(m[1]), None
        elif read is not None and (m := _TRUNCATED.search(line)) and int(m[1]) <= read:
            cut = (int(m[1]), int(m[2]))
    if read is None or cut is None:
        return None
    return (f"its raft client read the voter set at offset {read}, truncated the metadata log to offset {cut[0]} "
            f"on a fetch from leader {cut[1]}, and never read the voter set again, so it can reach no controller: "
            "Kafka's loss of the voter set in a dynamic quorum (findings/brokers-lose-the-voter-set.md)")
