"""A KRaft cluster of KafkaNodes, on machines a provisioner made (containers) or found (SSH hosts).

`KafkaCluster` is the one implementation of the Cluster protocol (`kchaos.core.protocols`): Kafka's
lifecycle, readiness and node control, written once against `KafkaNode`. What differs between
backends sits behind `Provisioner`: where the nodes come from, how they are reached, where
kchaos keeps its files on them, and how a node's CPU is capped.
"""
from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from kchaos.clusters import admin, quorum
from kchaos.clusters.distribution import KafkaDist, resolve
from kchaos.clusters.kafka_node import KafkaNode, NodeError
from kchaos.clusters.kraft import VOTER_LINES, NodeSpec, format_args, server_properties, voter_set_lost
from kchaos.clusters.tools import last_line
from kchaos.core import page_cache
from kchaos.core.config import ClusterConfig
from kchaos.core.kafka_versions import feature_answer, finalize_commands, scripts_env

log = logging.getLogger("kchaos.cluster")
# How often the readiness waits ask the brokers again: each run waits four times (brokers and topic, at setup
# and after the heal), and a whole second between asks added about half a second to each wait.
READY_POLL_S = 0.25


def new_cluster_id() -> str:
    """A random KRaft cluster id, as Kafka's Uuid.randomUuid makes them: 22 base64url characters,
    never starting with '-' (the storage tool's argument parser would take it for an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class ClusterError(RuntimeError):
    """The cluster could not be brought up or controlled; the message quotes the evidence."""


class HostCheckError(ClusterError):
    """A machine that was reached lacks what a run needs (root, tools, a free directory); one line naming it.
    The command line exits 4, as for a host it cannot reach: the machine is not ready, nothing was made."""


class _NotReady(Exception):
    pass


class Provisioner(Protocol):
    """The machines of one cluster: made and unmade (Docker), or reached and tidied (SSH).

    `specs` are the nodes (names, ids, the addresses clients and peers use); `bind` is what Kafka's
    listeners bind to (None: the node's address).
    """

    kind: str
    specs: list[NodeSpec]
    bind: str | None

    def prepare(self, dist: KafkaDist, say: Callable[[str], None], stage: KafkaDist | None = None) -> None:
        """Everything that comes before a run directory exists: build the node image (Docker); reach
        every host and check it has what kchaos needs (SSH). With `stage`, the release a rolling upgrade
        will stage on the nodes, also what it needs there beside its jars (`staged_archive`). Raises
        ClusterError, or a ConnectError naming the host; leaves nothing behind."""

    def staged_archive(self, dist: KafkaDist) -> Path | None:
        """The class archive to put beside `dist`'s jars staged on a node (prepare's `stage`), so that Kafka
        restarted on them starts as soon as on the node's own; None where there is none (SSH hosts, whose
        JVM kchaos does not make)."""

    def create(self, run_dir: Path) -> dict[str, KafkaNode]:
        """The nodes, by name, ready for Kafka's config: the jars and node scripts in place."""

    def node_env(self, node: str) -> dict[str, str]:
        """What the node scripts need beyond their layout (storage, heap, device, control port)."""

    def client_address(self) -> str:
        """The address the nodes see the harness's clients connect from."""

    def record(self) -> dict[str, Any]:
        """Facts for test.json once the nodes are reached (the SSH host keys trusted without known_hosts)."""

    def set_cpu(self, node: str, share: float | None) -> None:
        """Starve `node`'s Kafka to `share` of the CPU (a container's quota of one core; a host's duty
        cycle), or lift it (None)."""

    def collect(self, node: str, dest: Path) -> None:
        """Put `node`'s config and logs in `dest` (the run directory's folder for it)."""

    def destroy(self) -> None:
        """Undo `create`: remove containers and networks, or what kchaos put on the hosts. Idempotent."""


class KafkaCluster:
    """A KRaft cluster of brokers (`nodes`) and controllers, as `provisioner` provides them."""

    def __init__(self, cfg: ClusterConfig, provisioner: Provisioner, run_dir: Path, *,
                 say: Callable[[str], None] = log.info):
        self.cfg, self.provisioner, self.run_dir, self.say = cfg, provisioner, Path(run_dir), say
        self.specs: list[NodeSpec] = provisioner.specs
        self.by_name = {s.name: s for s in self.specs}
        self.nodes = [s.name for s in self.specs if s.is_broker]
        self.controllers = [s.name for s in self.specs if s.is_controller]
        # Spares (`--spares`) are not started with the cluster; a node is a member once it was started, and stops
        # being one when it is retired (decommissioned): the readiness waits and the heal cover the members.
        self.spares = self.nodes[cfg.nodes:] if cfg.spares else []
        self.members = {s.name for s in self.specs} - set(self.spares)
        self.cluster_id = new_cluster_id()
        self._nodes: dict[str, KafkaNode] = {}
        self.writeback: dict[str, page_cache.Writeback] = {}
        self._env: dict[str, dict[str, str]] = {}  # each node's node.env settings besides its layout
        self.release: dict[str, str] = {s.name: cfg.kafka_version for s in self.specs}  # what each node runs
        self._staged: dict[str, dict[str, str]] = {}  # release -> node -> the folder of its jars there

    # --- addresses -----------------------------------------------------------------
    def bootstrap(self) -> str:
        """`bootstrap.servers` for clients: every broker's PLAINTEXT listener."""
        return ",".join(self.listener(n) for n in self.nodes)

    def node_of(self, broker_id: int) -> str | None:
        """Node name of a broker/controller id, or None when the id is unknown (e.g. -1, no leader)."""
        return next((s.name for s in self.specs if s.node_id == broker_id), None)

    def id_of(self, node: str) -> int:
        """Kafka node.id of `node`."""
        return self.by_name[node].node_id

    def address(self, node: str) -> str:
        """`node`'s address, as peers and clients reach it."""
        return self.by_name[node].address

    def listener(self, node: str) -> str:
        """`node`'s Kafka listener, `address:port`, as clients reach that broker alone."""
        spec = self.by_name[node]
        return f"{spec.address}:{spec.port}"

    def client_address(self) -> str:
        """The address the nodes see clients (this host) connect from."""
        return self.provisioner.client_address()

    def node_dir(self, node: str) -> Path:
        """The run directory's folder for `node`: its config and logs."""
        return self.run_dir / "nodes" / node

    def node(self, name: str) -> KafkaNode:
        """The KafkaNode called `name` (ClusterError before setup)."""
        try:
            return self._nodes[name]
        except KeyError:
            raise ClusterError(f"{name}: no such node in this cluster (or the cluster is not set up)") from None

    def data_dir(self, node: str) -> str:
        """Kafka's log directory on `node`."""
        return self.node(node).data_dir

    # --- lifecycle -----------------------------------------------------------------
    def setup(self) -> None:
        """Make or reach the nodes (the provisioner is prepared), configure Kafka, format storage with
        one cluster id, start Kafka, and wait until every broker is registered everywhere."""
        self._nodes = self.provisioner.create(self.run_dir)
        self._each(self._configure)
        self.say(f"formatting storage on {len(self.specs)} nodes (cluster id {self.cluster_id})")
        self._each(lambda n: self.node(n).format(self.cluster_id, self.cfg.kafka_features,
                                                 format_args(self.by_name[n], self.specs, self.cfg)))
        self.say("starting Kafka" + (f" (not on the spares {', '.join(self.spares)})" if self.spares else ""))
        self._each(lambda n: self.start(n) if n in self.members else None)
        self.wait_brokers()

    def _configure(self, name: str) -> None:
        spec, node = self.by_name[name], self.node(name)
        props = server_properties(spec, self.specs, self.cfg, data_dir=node.data_dir,
                                  bind=self.provisioner.bind)
        self.node_dir(name).mkdir(parents=True, exist_ok=True)
        env = {**self.provisioner.node_env(name), **scripts_env(self.cfg.kafka_version),
               "KCHAOS_JIT": self.cfg.kafka_jit, **({"KCHAOS_CLOCK_FAULTS": "1"} if self.cfg.faketime else {})}
        if self.cfg.storage == "lazyfs":
            self.writeback[name] = wb = page_cache.plan(self.cfg.page_cache, self.cfg.writeback_age_s,
                                                        self._vm_writeback(node))
            env = {**env, **wb.env()}
        self._env[name] = env
        node.configure(props, env)
        self._staged.setdefault(self.cfg.kafka_version, {})[name] = node.layout.libs

    @staticmethod
    def _vm_writeback(node: KafkaNode) -> tuple[int, int] | None:
        """The node's kernel writeback settings (vm.dirty_expire_centisecs, vm.dirty_writeback_centisecs)."""
        try:
            r = node.run(["cat", *page_cache.VM_FILES], timeout=20)
        except Exception as e:
            log.warning("%s: cannot read %s: %s", node.name, " ".join(page_cache.VM_FILES), e)
            return None
        return page_cache.parse_vm(r.stdout) if r.ok else None

    def page_cache_record(self) -> dict[str, Any]:
        """test.json's `page_cache`: the writeback each node's lazyfs was given (after setup)."""
        return page_cache.record(self.writeback, self.cfg.storage)

    def _each(self, fn: Callable[[str], object]) -> None:
        names = [s.name for s in self.specs]
        with ThreadPoolExecutor(len(names)) as pool:
            list(pool.map(fn, names))

    def teardown(self) -> None:
        """Stop Kafka, keep its config and logs in the run directory, and undo what the provisioner
        made. Idempotent; never raises for a node that is already gone."""
        for name in list(self._nodes):
            try:
                if self.node(name).owns_kafka:  # an operator's own Kafka is left running
                    self.node(name).kill()
                self.provisioner.collect(name, self.node_dir(name))
            except Exception as e:
                log.warning("%s: not stopped or collected at teardown: %s", name, e)
        self.provisioner.destroy()

    def restore(self) -> None:
        """Resume and start Kafka wherever it is paused or down (what a fault may leave; the faults
        themselves are each nemesis's to undo), on every member. The nodes at once, as `setup` starts them."""
        self._each(self._revive)

    def _revive(self, name: str) -> None:
        if name in self.members:
            self.resume(name)
            self.start(name)

    def join(self, node: str, timeout: float = 60.0) -> None:
        """Start spare `node` and wait until every broker sees it registered: it is a member from then on."""
        self.members.add(node)
        self.start(node)
        self.wait_brokers(timeout)

    def retire(self, node: str) -> str:
        """Take broker `node` out of the cluster as an operator decommissions one: stop its Kafka (a controlled
        shutdown), then unregister it (`kafka-cluster unregister`); it is no member from then on, and the heal
        leaves it down. Returns the tool's answer."""
        self.stop(node)
        self.members.discard(node)
        live = next((n for n in self.nodes if n in self.members and self.is_running(n)), None)
        if live is None:
            raise ClusterError(f"no broker runs to unregister {node} from")
        code, out = self.kafka_tool(live, ["org.apache.kafka.tools.ClusterTool", "unregister", "--bootstrap-server",
                                           self.listener(live), "--id", str(self.id_of(node))])
        if code != 0:
            raise ClusterError(f"{live}: kafka-cluster unregister --id {self.id_of(node)} failed ({code}): "
                               f"{out.strip()[-300:]}")
        return last_line(out)

    # --- readiness -----------------------------------------------------------------
    def wait_brokers(self, timeout: float | None = None) -> None:
        """Wait until every broker sees every broker registered; on timeout raise ClusterError quoting the
        laggards' logs.

        Every broker is asked, not one: a client whose metadata comes from a
        broker that does not list some broker yet drops its connection to that
        broker, and the requests in flight on it (librdkafka's _DESTROY_BROKER).
        """
        want = {self.id_of(n) for n in self.nodes if n in self.members}
        deadline = timeout or self.cfg.startup_timeout_s
        missing: set[int] = set(want)

        def attempt() -> None:
            nonlocal missing
            missing = set()
            for node in (n for n in self.nodes if n in self.members):
                try:
                    missing |= want - admin.registered_brokers(self.listener(node))
                except Exception:
                    missing.add(self.id_of(node))
            if not missing:
                return
            # Only a cluster not ready yet is asked whether its Kafka processes still run (a command on each
            # node): one that has exited will never register.
            for spec in self.specs:
                if spec.name in self.members and not self.is_running(spec.name):
                    raise ClusterError(f"{spec.name}: Kafka exited during startup{self._why(spec.name)}:\n"
                                       f"{self.log_tail(spec.name)}")
            raise _NotReady(f"not registered everywhere: {sorted(missing)}")

        try:
            for a in Retrying(stop=stop_after_delay(deadline), wait=wait_fixed(READY_POLL_S),
                              retry=retry_if_exception_type(_NotReady), reraise=True):
                with a:
                    attempt()
        except _NotReady:
            laggards = [self.node_of(i) for i in sorted(missing)]
            tails = "\n".join(f"--- {n}{self._why(n)}:\n{self.log_tail(n)}" for n in laggards if n)
            raise ClusterError(f"brokers {laggards} not registered after {deadline:.0f}s; "
                               f"last log lines:\n{tails}") from None

    def wait_topic(self, topic: str, rf: int, timeout: float = 120.0) -> None:
        """Wait until every member broker's metadata shows each partition of `topic` with a leader and `rf` in-sync
        replicas."""
        for a in Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(READY_POLL_S), reraise=True):
            with a:
                for node in (n for n in self.nodes if n in self.members):
                    parts = admin.partitions(self.listener(node), topic)
                    short = {p: s.isr for p, s in parts.items() if s.leader < 0 or len(s.isr) < rf}
                    if not parts or short:
                        raise ClusterError(f"topic {topic} not fully in sync on {node} after {timeout:.0f}s: {short}")

    def wait_quorum(self, timeout: float = 120.0) -> None:
        """Wait until every member controller's view of the KRaft election names the same leader at the same epoch
        (`quorum.elections`); on timeout raise ClusterError saying each view. A controller cut off from the others
        raises its epoch by itself and, on a line without pre-vote, forces one more election once it is back,
        which may end after the brokers and the topic look whole again."""
        members = [n for n in self.controllers if n in self.members]
        for a in Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(READY_POLL_S * 2), reraise=True):
            with a:
                if (why := quorum.unsettled(quorum.elections(self, members))) is not None:
                    raise ClusterError(f"{why} after {timeout:.0f}s")

    def _why(self, node: str) -> str:
        """", because " and what `node`'s log says of why it cannot reach a controller, where it says (else "")."""
        try:
            why = voter_set_lost(self.node(node).log_lines(VOTER_LINES))
        except (NodeError, ClusterError):
            return ""
        return f", because {why}" if why else ""

    def log_tail(self, node: str, lines: int = 15) -> str:
        """The last lines of `node`'s server.log and stdout (which holds JVM crashes)."""
        try:
            return self.node(node).log_tail(lines)
        except (NodeError, ClusterError) as e:
            return f"(log not readable: {e})"

    # --- releases (a rolling upgrade) ------------------------------------------------
    def stage_release(self, version: str) -> None:
        """Put Kafka `version`'s jars on every node beside those it runs (resolved as the run's own: cached,
        else from Maven Central), so that switching a node to it is a restart."""
        if version in self._staged:
            return
        dist = resolve(version)
        archive = self.provisioner.staged_archive(dist)
        folders: dict[str, str] = {}
        self._each(lambda n: folders.__setitem__(n, self._guard(lambda: self.node(n).install_libs(dist, archive))))
        self._staged[version] = folders

    def use_release(self, node: str, version: str) -> None:
        """Have `node`'s next start run Kafka `version` (staged): its jars and its line's node settings."""
        env = {**self._env[node], **scripts_env(version)}
        self._guard(lambda: self.node(node).use_libs(self._staged[version][node], env))
        self.release[node] = version

    def upgrade_features(self, version: str, step: int) -> str:
        """Run step `step` of finalizing a roll to Kafka `version` (core.kafka_versions.finalize_commands: 0
        metadata.version, 1 from 4.0 the release's other features) with that release's tool on a broker that
        runs it; return its answer (core.kafka_versions.feature_answer), ClusterError quoting it when it fails."""
        node = next((n for n in self.nodes if self.release[n] == version and self.is_running(n)), None)
        if node is None:
            raise ClusterError(f"no running broker runs Kafka {version} to finalize from")
        cmd = finalize_commands(version, self.listener(node))[step]
        code, out = self.kafka_tool(node, cmd)
        if code != 0:
            raise ClusterError(f"{node}: kafka-features {' '.join(cmd[3:])} failed ({code}): {out.strip()[-300:]}")
        return feature_answer(out)

    # --- node control --------------------------------------------------------------
    def exec(self, node: str, cmd: list[str]) -> tuple[int, str]:
        """Run `cmd` on `node`; return (exit code, stdout+stderr)."""
        return self._guard(lambda: self.node(node).exec(cmd))

    def kill(self, node: str) -> None:
        """SIGKILL Kafka on `node` (no-op if it is not running)."""
        self._guard(self.node(node).kill)

    def stop(self, node: str) -> None:
        """SIGTERM Kafka on `node` and wait for a clean shutdown (SIGKILL after 60 s)."""
        self._guard(self.node(node).stop)

    def start(self, node: str) -> None:
        """Start Kafka on `node` unless it is running."""
        self._guard(self.node(node).start)

    def pause(self, node: str) -> None:
        """SIGSTOP Kafka on `node`."""
        self._guard(self.node(node).pause)

    def resume(self, node: str) -> None:
        """SIGCONT Kafka on `node` (no-op if it is not running)."""
        self._guard(self.node(node).resume)

    def is_running(self, node: str) -> bool:
        """Whether a Kafka process exists on `node` (a paused one counts)."""
        return self._guard(self.node(node).is_running)

    def wipe(self, node: str, everything: bool = False) -> str:
        """Replace `node`'s disk, its Kafka stopped: a broker's storage emptied and formatted anew with the
        cluster's id; a controller keeps its metadata log unless `everything` (a voter already removed from a
        dynamic quorum), since a KRaft voter that forgot its log could vote committed metadata away. Under a
        dynamic quorum storage formatted anew is no initial voter's. Returns what was wiped."""
        keep = self.by_name[node].is_controller and not everything
        extra = ("--no-initial-controllers",) if self.cfg.dynamic_quorum and not keep else ()
        return str(self._guard(lambda: self.node(node).wipe(self.cluster_id, keep, self.cfg.kafka_features, extra)))

    def conf_file(self, node: str) -> str:
        """The path of `node`'s server.properties, on the node."""
        return f"{self.node(node).layout.conf}/server.properties"

    def kafka_tool(self, node: str, args: list[str]) -> tuple[int, str]:
        """Run Kafka's tool `args[0]` (a class) with `args[1:]` and the jars `node` runs (`kafka-ctl tool`)."""
        return self.exec(node, [f"{self.node(node).layout.bin}/kafka-ctl", "tool", *args])

    def fault_ctl(self, node: str, *args: str) -> str:
        """Run `fault-ctl ARGS`, the node's fault script, on `node`; ClusterError quoting it on failure."""
        return self._guard(lambda: self.node(node).fault_ctl(*args))

    def set_cpu(self, node: str, share: float | None) -> None:
        """Cap `node` at `share` of one core, or remove the cap with None."""
        self._guard(lambda: self.provisioner.set_cpu(node, share))

    def copy_out(self, node: str, directory: str, files: list[str], dest: Path) -> int:
        """Copy `files` (relative to `directory`) off `node` into `dest`, read through any mount there; return bytes."""
        return self._guard(lambda: self.node(node).copy_out(directory, files, dest))

    def log_files(self, node: str, dest: Path | None = None) -> list[Path]:
        """Files of `node`'s log directory in the run directory (copied to `dest` if given)."""
        files = sorted(p for p in self.node_dir(node).iterdir() if p.is_file())
        if dest is not None and Path(dest).resolve() != self.node_dir(node).resolve():
            Path(dest).mkdir(parents=True, exist_ok=True)
            for f in files:
                (Path(dest) / f.name).write_bytes(f.read_bytes())
        return files

    @staticmethod
    def _guard(fn: Callable[[], object]):
        try:
            return fn()
        except NodeError as e:
            raise ClusterError(str(e)) from None
