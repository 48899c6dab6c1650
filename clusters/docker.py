"""Docker cluster backend: one container per Kafka node on a labelled bridge network.

Each container runs `sleep infinity` under docker-init; Kafka is a child started
and signalled with `kafka-ctl` through `docker exec`, so killing Kafka keeps the
container, its network namespace and its page cache. The node's directory in
the run directory is bind-mounted at /kchaos: server.properties and the broker
logs are written straight into the run directory and survive a killed harness.
"""
from __future__ import annotations

import base64
import ipaddress
import logging
import tarfile
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import docker
import docker.errors
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from clusters import admin
from clusters.engine import LABEL, docker_client
from clusters.kraft import NodeSpec, layout, server_properties
from harness.config import ClusterConfig

log = logging.getLogger("kchaos.cluster")



def new_cluster_id() -> str:
    """A random KRaft cluster id, as Kafka's Uuid.randomUuid makes them: 22 base64url characters,
    never starting with '-' (the storage tool's argument parser would take it for an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid

class ClusterError(RuntimeError):
    """The cluster could not be brought up or controlled; the message quotes the evidence."""


class _NotReady(Exception):
    pass


class DockerCluster:
    """A KRaft cluster of containers n1..nN (plus c1..cK dedicated controllers when configured)."""

    def __init__(self, cfg: ClusterConfig, image: str, run_dir: Path, *,
                 client: docker.DockerClient | None = None, say: Callable[[str], None] = log.info):
        self.cfg = cfg
        self.image = image
        self.run_dir = Path(run_dir)
        self.client = client or docker_client()
        self.say = say
        self.specs: list[NodeSpec] = layout(cfg)
        self.by_name = {s.name: s for s in self.specs}
        self.nodes = [s.name for s in self.specs if s.is_broker]
        self.controllers = [s.name for s in self.specs if s.is_controller]
        self.network_name = "kchaos-net"
        self.cluster_id = new_cluster_id()

    # --- addresses -----------------------------------------------------------------
    def bootstrap(self) -> str:
        """`bootstrap.servers` for clients: every broker's PLAINTEXT listener."""
        return ",".join(f"{self.by_name[n].address}:9092" for n in self.nodes)

    def node_of(self, broker_id: int) -> str | None:
        """Node name of a broker/controller id, or None when the id is unknown (e.g. -1, no leader)."""
        return next((s.name for s in self.specs if s.node_id == broker_id), None)

    def id_of(self, node: str) -> int:
        """Kafka node.id of `node`."""
        return self.by_name[node].node_id

    def address(self, node: str) -> str:
        """Static IP address of `node` on the cluster network."""
        return self.by_name[node].address

    def client_address(self) -> str:
        """The address the nodes see clients (this host) connect from: the network's gateway."""
        return str(next(ipaddress.ip_network(self.cfg.subnet).hosts()))

    def node_dir(self, node: str) -> Path:
        """The run directory's folder for `node` (bind-mounted at /kchaos in the container)."""
        return self.run_dir / "nodes" / node

    # --- lifecycle -----------------------------------------------------------------
    def setup(self) -> None:
        """Create network and containers, format storage with one cluster id, start Kafka, wait for brokers."""
        ensure_free(self.client)
        self._create_network()
        for spec in self.specs:
            self._create_container(spec)
        self.say(f"formatting storage on {len(self.specs)} nodes (cluster id {self.cluster_id})")
        self._each(self._format)
        self.say("starting Kafka")
        self._each(self.start)
        self.wait_brokers()

    def _create_network(self) -> None:
        net = ipaddress.ip_network(self.cfg.subnet)
        pool = docker.types.IPAMPool(subnet=str(net), gateway=self.client_address())
        try:
            self.client.networks.create(self.network_name, driver="bridge", labels={LABEL: "1"},
                                        ipam=docker.types.IPAMConfig(pool_configs=[pool]),
                                        options={"com.docker.network.bridge.name": "kchaos0"})
        except docker.errors.APIError as e:
            raise ClusterError(f"cannot create network {self.network_name} on {self.cfg.subnet}: "
                               f"{e.explanation}; pick another --subnet or run `kchaos cleanup`") from None

    def _create_container(self, spec: NodeSpec) -> None:
        d = self.node_dir(spec.name)
        d.mkdir(parents=True, exist_ok=True)
        (d / "server.properties").write_text(server_properties(spec, self.specs, self.cfg))
        api = self.client.api
        host_config = api.create_host_config(
            init=True, cap_add=["NET_ADMIN", "SYS_ADMIN"], devices=["/dev/fuse:/dev/fuse:rwm"],
            binds={str(d.resolve()): {"bind": "/kchaos", "mode": "rw"}},
            security_opt=["apparmor=unconfined"], sysctls={"net.ipv4.tcp_syn_retries": "2"})
        netcfg = api.create_networking_config(
            {self.network_name: api.create_endpoint_config(ipv4_address=spec.address)})
        api.create_container(self.image, command=["sleep", "infinity"], name=f"kchaos-{spec.name}",
                             hostname=spec.name, labels={LABEL: "1", f"{LABEL}.node": spec.name,
                                                         f"{LABEL}.run": str(self.run_dir)},
                             host_config=host_config, networking_config=netcfg,
                             environment=self._environment())
        api.start(f"kchaos-{spec.name}")

    def _environment(self) -> dict[str, str]:
        env = {"KAFKA_HEAP": "384m", "KCHAOS_STORAGE": self.cfg.storage}
        if self.cfg.writeback_age_s:
            env["KCHAOS_WRITEBACK_AGE"] = f"{self.cfg.writeback_age_s:g}"
        return env

    def _each(self, fn: Callable[[str], object]) -> None:
        names = [s.name for s in self.specs]
        with ThreadPoolExecutor(len(names)) as pool:
            list(pool.map(fn, names))

    def _format(self, node: str) -> None:
        code, out = self.exec(node, ["kafka-ctl", "format", self.cluster_id])
        if code != 0:
            raise ClusterError(f"{node}: formatting storage failed: {out.strip()[-300:]}")

    def teardown(self) -> None:
        """Remove this cluster's containers and network; the run directory keeps the logs. Idempotent."""
        for spec in self.specs:
            try:
                self.client.containers.get(f"kchaos-{spec.name}").remove(force=True)
            except docker.errors.NotFound:
                pass
        try:
            self.client.networks.get(self.network_name).remove()
        except docker.errors.NotFound:
            pass

    # --- readiness -----------------------------------------------------------------
    def wait_brokers(self, timeout: float | None = None) -> None:
        """Wait until every broker sees every broker registered; on timeout raise ClusterError quoting the
        laggards' logs.

        Every broker is asked, not one: a client whose metadata comes from a
        broker that does not list some broker yet drops its connection to that
        broker, and the requests in flight on it (librdkafka's _DESTROY_BROKER).
        """
        want = {self.id_of(n) for n in self.nodes}
        deadline = timeout or self.cfg.startup_timeout_s
        missing: set[int] = set(want)

        def attempt() -> None:
            nonlocal missing
            for node in self.specs:
                if not self.is_running(node.name):
                    raise ClusterError(f"{node.name}: Kafka exited during startup:\n{self.log_tail(node.name)}")
            missing = set()
            for node in self.nodes:
                try:
                    missing |= want - admin.registered_brokers(f"{self.address(node)}:9092")
                except Exception:  # noqa: BLE001 - any client error just means "not yet"
                    missing.add(self.id_of(node))
            if missing:
                raise _NotReady(f"not registered everywhere: {sorted(missing)}")

        try:
            for a in Retrying(stop=stop_after_delay(deadline), wait=wait_fixed(1),
                              retry=retry_if_exception_type(_NotReady), reraise=True):
                with a:
                    attempt()
        except _NotReady:
            laggards = [self.node_of(i) for i in sorted(missing)]
            tails = "\n".join(f"--- {n}:\n{self.log_tail(n)}" for n in laggards if n)
            raise ClusterError(f"brokers {laggards} not registered after {deadline:.0f}s; last log lines:\n{tails}") from None

    def wait_topic(self, topic: str, rf: int, timeout: float = 120.0) -> None:
        """Wait until every broker's metadata shows each partition of `topic` with a leader and `rf` in-sync replicas."""
        for a in Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(1), reraise=True):
            with a:
                for node in self.nodes:
                    parts = admin.partitions(f"{self.address(node)}:9092", topic)
                    short = {p: s.isr for p, s in parts.items() if s.leader < 0 or len(s.isr) < rf}
                    if not parts or short:
                        raise ClusterError(f"topic {topic} not fully in sync on {node} after {timeout:.0f}s: {short}")

    def log_tail(self, node: str, lines: int = 15) -> str:
        """The last lines of `node`'s server.log and stdout (which holds JVM crashes)."""
        out = []
        for name in ("server.log", "stdout.log"):
            f = self.node_dir(node) / name
            if f.exists():
                tail = f.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"[{name}]\n" + "\n".join(tail))
        return "\n".join(out) or "(no log written)"

    # --- node control --------------------------------------------------------------
    def exec(self, node: str, cmd: list[str]) -> tuple[int, str]:
        """Run `cmd` in `node`'s container; return (exit code, stdout+stderr)."""
        try:
            res = self.client.containers.get(f"kchaos-{node}").exec_run(cmd)
        except docker.errors.NotFound:
            raise ClusterError(f"{node}: container is gone") from None
        return res.exit_code, res.output.decode(errors="replace")

    def _ctl(self, node: str, action: str, ok_codes: tuple[int, ...] = (0,)) -> str:
        code, out = self.exec(node, ["kafka-ctl", action])
        if code not in ok_codes:
            raise ClusterError(f"{node}: kafka-ctl {action} failed ({code}): {out.strip()}")
        log.info("%s: %s -> %s", node, action, out.strip())
        return out.strip()

    def kill(self, node: str) -> None:
        """SIGKILL Kafka on `node` (no-op if it is not running)."""
        self._ctl(node, "kill", (0, 3))

    def stop(self, node: str) -> None:
        """SIGTERM Kafka on `node` and wait for a clean shutdown (SIGKILL after 60 s)."""
        self._ctl(node, "stop", (0, 3))

    def start(self, node: str) -> None:
        """Start Kafka on `node` unless it is running."""
        self._ctl(node, "start")

    def pause(self, node: str) -> None:
        """SIGSTOP Kafka on `node`."""
        self._ctl(node, "pause")

    def resume(self, node: str) -> None:
        """SIGCONT Kafka on `node` (no-op if it is not running)."""
        self._ctl(node, "resume", (0, 3))

    def is_running(self, node: str) -> bool:
        """Whether a Kafka process exists on `node` (a paused one counts)."""
        code, _ = self.exec(node, ["kafka-ctl", "status"])
        return code == 0

    def fault_ctl(self, node: str, *args: str) -> str:
        """Run `fault-ctl ARGS` in `node` (see clusters/node/fault-ctl); ClusterError quoting it on failure."""
        code, out = self.exec(node, ["fault-ctl", *args])
        if code != 0:
            raise ClusterError(f"{node}: fault-ctl {' '.join(args)} failed ({code}): {out.strip()[-300:]}")
        log.info("%s: fault-ctl %s -> %s", node, " ".join(args), out.strip()[-200:])
        return out

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

    def heal(self) -> None:
        """Undo every fault on every node: drop rules, shaping, disk delay, CPU caps; resume and start Kafka."""
        for node in [s.name for s in self.specs]:
            self.fault_ctl(node, "heal")
            self.set_cpu(node, None)
            self.resume(node)
            self.start(node)

    def copy_out(self, node: str, directory: str, files: list[str], dest: Path) -> int:
        """Copy `files` (paths relative to `directory`) out of `node`'s container into `dest`; return bytes.

        Read by `tar` inside the container, so through any mount made there
        (lazyfs over the data directory), which `docker cp`/get_archive would
        not see. Raises ClusterError when tar fails or the container is gone.
        """
        if not files:
            return 0
        api = self.client.api
        script = 'cd "$1" && shift && exec tar -cf - -- "$@"'
        try:
            ex = api.exec_create(f"kchaos-{node}", ["sh", "-c", script, "sh", directory, *files])
            dest.mkdir(parents=True, exist_ok=True)
            err = b""
            with tempfile.TemporaryFile() as buf:
                for out, e in api.exec_start(ex["Id"], stream=True, demux=True):
                    if out:
                        buf.write(out)
                    if e:
                        err += e
                code = api.exec_inspect(ex["Id"]).get("ExitCode")
                if code != 0:
                    tail = err.decode(errors="replace")[-300:]
                    raise ClusterError(f"{node}: tar of {directory} failed ({code}): {tail}")
                size = buf.tell()
                buf.seek(0)
                with tarfile.open(fileobj=buf) as tf:
                    tf.extractall(dest, filter="data")
        except docker.errors.NotFound:
            raise ClusterError(f"{node}: container is gone") from None
        return size

    def log_files(self, node: str, dest: Path | None = None) -> list[Path]:
        """Files of `node`'s log directory (already in the run directory; copied to `dest` if given)."""
        files = sorted(p for p in self.node_dir(node).iterdir() if p.is_file())
        if dest is not None and Path(dest).resolve() != self.node_dir(node).resolve():
            Path(dest).mkdir(parents=True, exist_ok=True)
            for f in files:
                (Path(dest) / f.name).write_bytes(f.read_bytes())
        return files


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
        c.remove(force=True)
        removed["containers"].append(c.name)
    for n in client.networks.list(filters={"label": LABEL}):
        n.remove()
        removed["networks"].append(n.name)
    return removed

