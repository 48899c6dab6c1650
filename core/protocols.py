"""The small protocols the runner composes, after Jepsen: cluster, client, nemesis, checker.

Each has one job. A new nemesis, workload or checker is one module implementing
one of these plus one line in its package's registry.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kchaos.core.history import History

Valid = bool | str  # True, False or "unknown"


class Topology(Protocol):
    """Which nodes a cluster has, how to reach them, and when they are ready: what a workload needs."""

    nodes: list[str]  # brokers
    controllers: list[str]  # KRaft controllers (the same nodes as brokers in combined mode)
    members: set[str]  # the nodes that are part of the cluster now: spares not yet added, and retired brokers, are not

    def bootstrap(self) -> str:
        """The `bootstrap.servers` string clients use."""

    def node_of(self, node_id: int) -> str | None:
        """The node with Kafka id `node_id`, or None (e.g. for -1, "no leader")."""

    def id_of(self, node: str) -> int:
        """The Kafka id (`node.id`) of `node`."""

    def address(self, node: str) -> str:
        """`node`'s address on the cluster network."""

    def listener(self, node: str) -> str:
        """`node`'s Kafka listener, `address:port`, as clients reach that broker alone."""

    def client_address(self) -> str:
        """The address clients reach the nodes from."""

    def wait_brokers(self, timeout: float | None = None) -> None:
        """Wait until every broker is registered."""

    def wait_topic(self, topic: str, rf: int, timeout: float = 120.0) -> None:
        """Wait until every partition of `topic` has a leader and `rf` in-sync replicas."""

    def wait_quorum(self, timeout: float = 120.0) -> None:
        """Wait until the KRaft controllers agree on one leader at one epoch."""


class NodeControl(Topology, Protocol):
    """Acting on one node's Kafka and machine: what most nemeses need."""

    def kill(self, node: str) -> None:
        """SIGKILL the Kafka process on `node`; the machine and its page cache stay."""

    def stop(self, node: str) -> None:
        """Stop Kafka on `node` gracefully (SIGTERM) and wait for it to exit."""

    def start(self, node: str) -> None:
        """Start Kafka on `node` if it is not running."""

    def pause(self, node: str) -> None:
        """SIGSTOP the Kafka process on `node`."""

    def resume(self, node: str) -> None:
        """SIGCONT the Kafka process on `node`."""

    def is_running(self, node: str) -> bool:
        """Whether a Kafka process exists on `node`."""

    def exec(self, node: str, cmd: list[str]) -> tuple[int, str]:
        """Run `cmd` on `node`; return its exit code and combined output."""

    def data_dir(self, node: str) -> str:
        """Kafka's log directory on `node`."""

    def fault_ctl(self, node: str, *args: str) -> str:
        """Run the node's fault tool (iptables, tc, lazyfs control); raise on failure."""

    def conf_file(self, node: str) -> str:
        """The path of `node`'s server.properties, on the node."""

    def kafka_tool(self, node: str, args: list[str]) -> tuple[int, str]:
        """Run one of Kafka's tools (its class, then its arguments) with `node`'s Kafka jars, on `node`; return its exit
        code and output."""

    def set_cpu(self, node: str, share: float | None) -> None:
        """Starve `node`'s Kafka to `share` of the CPU (Docker: of one core, for the container; a host: of the
        time, by a stop/continue duty cycle), or lift it (None)."""

    def restore(self) -> None:
        """Resume and start Kafka on every node, the nodes at once, wherever it is paused or down. Faults are
        undone by the nemeses that made them, never by the cluster."""


class Disks(NodeControl, Protocol):
    """Replacing a node's disk: what the wipe nemesis needs."""

    def wipe(self, node: str, everything: bool = False) -> str:
        """Empty `node`'s Kafka storage as a replaced disk leaves it and format it anew with the cluster's id
        (a controller keeps its metadata log unless `everything`); Kafka must be stopped. Returns what was wiped."""


class Membership(NodeControl, Protocol):
    """Brokers joining and leaving: what the add-broker and decommission nemeses need."""

    spares: list[str]  # brokers not started with the cluster (`--spares`)

    def join(self, node: str, timeout: float = 60.0) -> None:
        """Start spare `node` and wait until every broker sees it registered; it is a member from then on."""

    def retire(self, node: str) -> str:
        """Stop broker `node` and unregister it (`kafka-cluster unregister`); it is no member from then on, and the
        heal leaves it down. Returns the tool's answer."""


class Releases(Protocol):
    """The Kafka release each node runs, for a rolling upgrade."""

    release: dict[str, str]  # the release each node runs, or runs at its next start

    def stage_release(self, version: str) -> None:
        """Put Kafka `version`'s jars on every node beside those it runs."""

    def use_release(self, node: str, version: str) -> None:
        """Have `node`'s next start run Kafka `version` (staged first)."""

    def upgrade_features(self, version: str, step: int) -> str:
        """Step `step` of finalizing a roll to `version` (kafka-features upgrade); return the tool's last line."""


class RollingUpgrade(NodeControl, Releases, Protocol):
    """Node control and releases: what a rolling upgrade needs."""


class NodeFiles(Protocol):
    """Files off the nodes: Kafka's logs and data, for the run directory and the evidence."""

    def copy_out(self, node: str, directory: str, files: list[str], dest: Path) -> int:
        """Copy `files` (relative to `directory` on `node`) into `dest`; return the bytes moved."""

    def log_tail(self, node: str, lines: int = 15) -> str:
        """The last lines of `node`'s Kafka logs."""

    def log_files(self, node: str, dest: Path) -> list[Path]:
        """Copy `node`'s logs and config into `dest`; return the files written."""


@runtime_checkable
class Cluster(RollingUpgrade, Disks, Membership, NodeFiles, Protocol):
    """A running Kafka cluster of named nodes (Jepsen's DB): its lifecycle, and every smaller protocol. The runner
    holds one; a workload, nemesis or evidence step asks only for the protocol it uses."""

    def setup(self) -> None:
        """Create and start every node; return once every broker is registered."""

    def teardown(self) -> None:
        """Kill the Kafka kchaos runs (an operator's own is left running), keep its config and logs in
        the run directory, and remove what was made for the nodes (containers and network; kchaos's
        files on hosts). Idempotent."""

    def page_cache_record(self) -> dict[str, Any]:
        """What each node's page cache does with unsynced data (test.json's `page_cache`), after setup."""
        ...


class FaultSkipped(RuntimeError):
    """A nemesis cannot apply a fault now (no leader, node down); recorded as `info`, the run goes on."""


class Workload(Protocol):
    """Clients driving the cluster; every operation goes into the history."""

    @property
    def counts(self) -> dict[str, int]:
        """Live tallies for the progress line: send, ok, info, fail, polled."""

    def setup(self, cluster: Topology) -> None:
        """Create topics and anything else the workload needs."""

    def start(self, cluster: Topology, history: History) -> None:
        """Start the client processes in the background."""

    def stop(self) -> None:
        """Stop the client processes and wait for their outstanding operations."""

    def final_read(self, cluster: Topology, history: History) -> dict[int, bool]:
        """After faults have healed, read everything back (drain) into the history; return, per
        partition, whether the read reached the high watermark."""


class CrashableClients(Protocol):
    """A workload whose clients a nemesis can crash (the queue workload's group members, the txn workload's
    processes; `crash-client`)."""

    def crash_client(self, pick: int, restart_after: float) -> dict[str, Any]:
        """Crash one client chosen by `pick` and restart it as the same process `restart_after` seconds
        later; return what to record. ValueError when the workload has no such client."""


class Nemesis(Protocol):
    """A fault injector. `teardown` always heals, whatever state the faults left."""

    name: str

    def setup(self, cluster: Cluster, history: History) -> None:
        """Prepare (nothing is broken yet)."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """Apply the fault described by `op` (from the schedule); return what it resolved to."""

    def teardown(self) -> None:
        """Heal everything this nemesis may have broken. Idempotent."""


class Checker(Protocol):
    """Decides whether a history is valid."""

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """Return at least `{"valid": True | False | "unknown"}`."""

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` for each (test, history) pair, in order; may share one job among them."""
