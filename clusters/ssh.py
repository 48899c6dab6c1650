"""SSH backend: Kafka on machines that already exist, listed in a hosts file (`HostsFile`).

The harness reaches every host over SSH (`SshRemote`), checks what kchaos needs there,
and puts everything it makes in one directory it owns (`dir` of the hosts file, default
/var/lib/kchaos): the node scripts in bin/, the Kafka jars in dist/<version>/ (kept between
runs: uploaded once per version), config and logs in conf/, Kafka's data in data/, pid files and
lazyfs's FIFO in run/, and manifest.json, which says which run owns the host. Teardown undoes the
faults (`fault-ctl cleanup`), copies the config and logs into the run directory, and removes all
of it but dist/; `kchaos cleanup --hosts` (`cleanup_hosts`) removes the whole directory. The jars
are in dist/<version>-<fingerprint>/libs.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from kchaos.clusters import lazyfs
from kchaos.clusters.cluster import ClusterError, HostCheckError
from kchaos.clusters.distribution import KafkaDist
from kchaos.clusters.kafka_external import ExternalKafkaNode
from kchaos.clusters.kafka_node import KafkaNode, NodeLayout
from kchaos.clusters.kraft import BROKER_PORT, NodeSpec
from kchaos.clusters.remote import Remote
from kchaos.clusters.remote_ssh import to_remote
from kchaos.core.config import ClusterConfig
from kchaos.core.hosts import Host, HostsFile

log = logging.getLogger("kchaos.ssh")

MANIFEST = "manifest.json"
T = TypeVar("T")

# What a host must have: checked as root (the faults need it), so sbin is on the PATH.
_PREREQUISITES = r"""
missing=""
if [ "$2" = managed ]; then
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ "${v:-0}" -ge 17 ] 2>/dev/null || missing="$missing java-17-or-newer"
else
  command -v ss >/dev/null || missing="$missing ss"
fi
for c in iptables tc ip tar timeout pgrep setsid; do command -v "$c" >/dev/null || missing="$missing $c"; done
if [ "$1" = lazyfs ]; then
  [ -c /dev/fuse ] || missing="$missing /dev/fuse"
  command -v fusermount3 >/dev/null || missing="$missing fusermount3"
  # The lazyfs binary is built on the harness: $3 its machine, $4 the glibc it needs, then its libraries.
  m=$(uname -m)
  [ "$m" = "$3" ] || missing="$missing lazyfs-for-$3(host-is-$m)"
  g=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
  if [ -z "$g" ] || [ "$(printf '%s\n%s\n' "$4" "$g" | sort -V | head -1)" != "$4" ]; then
    missing="$missing glibc-$4-or-newer(host-has-${g:-none})"
  fi
  shift 4
  for lib in "$@"; do
    ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$lib " && continue
    found=""
    for f in /lib/*/"$lib" /usr/lib/*/"$lib" /lib64/"$lib" /usr/lib64/"$lib" /lib/"$lib" /usr/lib/"$lib"; do
      [ -e "$f" ] && found=1
    done
    [ -n "$found" ] || missing="$missing $lib"
  done
fi
echo "missing:$missing"
"""

# Where kafka-ctl looks for libfaketime (faketime_lib there): the same places.
_FAKETIME = ("for f in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib64/faketime/libfaketime.so.1 "
             "/usr/lib/faketime/libfaketime.so.1 /usr/local/lib/faketime/libfaketime.so.1; "
             "do [ -f \"$f\" ] && exit 0; done; exit 1")


def prerequisite_args(storage: str, host: Host, lazyfs_bin: Path | None) -> list[str]:
    """The arguments of the prerequisite check (`_PREREQUISITES`) for `host`: storage, managed or
    external, and for lazyfs storage what the harness-built binary needs (`lazyfs.needs`)."""
    args = ["lazyfs" if storage == "lazyfs" else "plain", "external" if host.external else "managed"]
    if storage == "lazyfs" and lazyfs_bin is not None:
        args += lazyfs.needs(lazyfs_bin).args()
    return args


def specs_of(hosts: HostsFile) -> list[NodeSpec]:
    """The nodes of a hosts file, at the address (and port) clients reach Kafka: node ids 1..N in file
    order for a managed Kafka, the file's node_id for an external one."""
    roles = {"both": ("broker", "controller"), "broker": ("broker",), "controller": ("controller",)}
    return [NodeSpec(h.name, h.external.node_id if h.external else i, h.kafka_address, roles[h.role],
                     h.external.kafka_port if h.external else BROKER_PORT) for i, h in enumerate(hosts.nodes, 1)]


def each(items: list[T], fn: Callable[[T], object]) -> list:
    """`fn` on every item in parallel (one thread per host); the first exception is raised."""
    with ThreadPoolExecutor(max(1, len(items))) as pool:
        return list(pool.map(fn, items))


class SshProvisioner:
    """The hosts of a hosts file: Kafka installed and run by kchaos, or the operator's own (`kafka: external`)."""

    kind = "ssh"

    def __init__(self, cfg: ClusterConfig, hosts: HostsFile, *, connect_timeout: float = 10.0):
        self.cfg, self.hosts = cfg, hosts
        self.specs = specs_of(hosts)
        # Kafka's address is another than the host's own (client_address, behind a NAT): listen everywhere.
        self.bind = "0.0.0.0" if any(h.client_address for h in hosts.nodes) else None
        self.remotes: dict[str, Remote] = {h.name: to_remote(h, hosts, connect_timeout=connect_timeout)
                                           for h in hosts.nodes}
        self.nodes: dict[str, KafkaNode] = {}
        self._dist: KafkaDist | None = None
        self._lazyfs: Path | None = None
        self._client_address: str | None = None
        self._devices: dict[str, str] = {}

    def _layout(self) -> NodeLayout:
        return NodeLayout.under(self.hosts.dir, self._dist)

    def _node(self, h: Host) -> KafkaNode:
        spec = next(s for s in self.specs if s.name == h.name)
        if h.external:
            return ExternalKafkaNode(spec, self.remotes[h.name], self._layout(), h.external, sudo=h.sudo)
        return KafkaNode(spec, self.remotes[h.name], self._layout(), sudo=h.sudo)

    # --- before the run directory ----------------------------------------------------------
    def prepare(self, dist: KafkaDist, say: Callable[[str], None], stage: KafkaDist | None = None) -> None:
        """Build lazyfs (cached), reach every host, and check each: root or sudo, Java 17+, iptables, tc,
        FUSE when the storage is lazyfs, libfaketime when a clock fault may run, and no other run's files
        in the owned directory. A release to `stage` needs nothing more here than its jars."""
        self._dist = dist
        try:
            self._lazyfs = lazyfs.build()
        except lazyfs.LazyfsBuildError as e:
            raise HostCheckError(str(e)) from None
        say(f"checking {len(self.hosts.nodes)} hosts over SSH")
        each(list(self.hosts.nodes), self._check)
        first = self.remotes[self.hosts.nodes[0].name]
        conn = first.run("echo $SSH_CONNECTION", timeout=20).stdout.split()
        if not conn:
            raise HostCheckError(f"{first.name}: SSH_CONNECTION is not set; cannot tell the harness's address")
        self._client_address = conn[0]
        for h in self.hosts.nodes:
            peer = next((s.address for s in self.specs if s.name != h.name), self._client_address)
            try:
                peer = socket.gethostbyname(peer)  # `ip route get` takes an address, not a name
            except OSError:
                pass
            out = self.remotes[h.name].run(["ip", "-o", "route", "get", peer], timeout=20).stdout.split()
            self._devices[h.name] = out[out.index("dev") + 1] if "dev" in out else "eth0"

    def _check(self, h: Host) -> None:
        node = self._node(h)
        who = f"{h.name} ({h.address})"
        if h.sudo:
            r = node.run(["true"], timeout=20)
            if not r.ok:
                raise HostCheckError(f"{who}: `sudo -n` does not work for {h.user}: "
                                     f"{(r.stderr or r.stdout).strip()[:200]}")
        elif node.run(["id", "-u"], timeout=20).stdout.strip() != "0":
            raise HostCheckError(f"{who}: {h.user} is not root, and the faults need root: set `sudo: true`")
        r = node.run(["sh", "-c", _PREREQUISITES, "sh", *prerequisite_args(self.cfg.storage, h, self._lazyfs)],
                     timeout=60)
        if not r.ok or "missing:" not in r.stdout:
            raise HostCheckError(f"{who}: the prerequisite check did not run ({r.exit_code}): "
                                 f"{(r.stderr or r.stdout).strip()[-200:]}")
        missing = r.stdout.rpartition("missing:")[2].split()
        if self.cfg.faketime and not h.external and not node.run(["sh", "-c", _FAKETIME], timeout=20).ok:
            missing.append("libfaketime (Debian's faketime package; the clock faults run Kafka under it)")
        if missing:
            raise HostCheckError(f"{who}: missing {', '.join(missing)}")
        m = read_manifest(node, self.hosts.dir)
        if m is not None:
            owner = f"run {m.get('run')} (pid {m.get('pid')} on {m.get('harness')})" if m else "an unknown run"
            raise HostCheckError(f"{who}: {self.hosts.dir} holds the files of {owner}; another run is active or "
                                 f"was killed: `kchaos cleanup --hosts {self.hosts.path}` removes them")

    def staged_archive(self, dist: KafkaDist) -> Path | None:
        """None: a host's JVM is its own, and an archive serves only the JVM that made it."""
        return None

    # --- the run ------------------------------------------------------------------------
    def create(self, run_dir: Path) -> dict[str, KafkaNode]:
        """Claim every host (manifest.json), upload the node scripts and (once per version) the jars."""
        dist = self._dist
        if dist is None:
            raise ClusterError("hosts not prepared: prepare() was not called")
        manifest = json.dumps({"run": str(run_dir), "pid": os.getpid(), "harness": socket.gethostname(),
                               "started_unix": round(time.time(), 3), "dir": self.hosts.dir}) + "\n"

        def one(h: Host) -> KafkaNode:
            node = self._node(h)
            node.run(["mkdir", "-p", self.hosts.dir], check=True)
            node.write(f"{self.hosts.dir}/{MANIFEST}", manifest)
            self.nodes[h.name] = node
            t0 = time.monotonic()
            if node.install(dist, self._lazyfs):
                log.info("%s: Kafka %s uploaded in %.1fs", h.name, dist.version, time.monotonic() - t0)
            return node

        each(list(self.hosts.nodes), one)
        return dict(self.nodes)

    def node_env(self, node: str) -> dict[str, str]:
        """Storage, heap, the interface faults shape, and the SSH port no drop rule may cut."""
        env = {"KAFKA_HEAP": "384m", "KCHAOS_STORAGE": self.cfg.storage,
               "KCHAOS_DEV": self._devices.get(node, "eth0"),
               "KCHAOS_CONTROL_PORT": str(self.hosts.host(node).port),
               "KCHAOS_KAFKA_PORT": str(next(s.port for s in self.specs if s.name == node))}
        return env

    def client_address(self) -> str:
        """The harness's address as the hosts see it (from $SSH_CONNECTION)."""
        if self._client_address is None:
            raise ClusterError("hosts not prepared: prepare() was not called")
        return self._client_address

    def record(self) -> dict[str, Any]:
        """The host keys trusted without being in known_hosts (accept_unknown_host_keys), by node."""
        keys = {name: k for name, r in self.remotes.items() if (k := getattr(r, "accepted_host_key", None))}
        return {"accepted_host_keys": keys} if keys else {}

    def set_cpu(self, node: str, share: float | None) -> None:
        """Starve `node`'s Kafka to `share` of the time (fault-ctl cpu: a SIGSTOP/SIGCONT duty cycle), or stop."""
        self.nodes[node].fault_ctl(*(("uncpu",) if share is None else ("cpu", f"{share:g}")))

    def collect(self, node: str, dest: Path) -> None:
        """Copy the node's conf/ (server.properties and the logs) into `dest`."""
        self.nodes[node].fetch_conf(dest)

    def destroy(self) -> None:
        """Undo every fault and process of kchaos on every host and remove the owned directory, except the
        jars (dist/), which the next run reuses. Idempotent; a host that cannot be reached is logged."""
        def one(node: KafkaNode) -> None:
            try:
                release(node, keep_dist=True)
            except Exception as e:
                log.warning("%s: not cleaned up: %s", node.name, e)

        each(list(self.nodes.values()), one)
        self.nodes.clear()


def release(node: KafkaNode, *, keep_dist: bool) -> list[str]:
    """Undo what kchaos made on `node`'s host: faults, processes and mounts (`fault-ctl cleanup`), then its
    directory (all of it, or all but dist/). Return the lines fault-ctl printed."""
    root = node.layout.root
    assert root, "only a node in a directory kchaos owns can be released"
    lines: list[str] = []
    if node.run(["test", "-x", f"{node.layout.bin}/fault-ctl"], timeout=20).ok:
        if not node.run(["test", "-f", f"{node.layout.bin}/node.env"], timeout=20).ok:
            # Killed before the config was written: without node.env the scripts would look at the node
            # image's paths, which on this host are not kchaos's.
            node.write(f"{node.layout.bin}/node.env", node.layout.env({}))
        lines = node.fault_ctl("cleanup").splitlines()
    if keep_dist:
        node.run(["sh", "-c", 'cd "$1" && find . -mindepth 1 -maxdepth 1 ! -name dist '
                  '-exec rm -rf --one-file-system {} +', "sh", root], timeout=120, check=True)
    else:
        node.remove_root()
    return lines


def cleanup_hosts(hosts: HostsFile, say: Callable[[str], None] = log.info) -> dict[str, list[str]]:
    """`kchaos cleanup --hosts`: on every host, undo kchaos's faults, processes and mounts and remove its
    whole directory, jars included, also after a harness was killed mid-fault. Return, per host, what
    was removed. Never touches what kchaos did not make (see fault-ctl cleanup)."""
    prov = SshProvisioner(ClusterConfig(), hosts)

    def one(h: Host) -> tuple[str, list[str]]:
        node = prov._node(h)
        if not node.run(["test", "-d", hosts.dir], timeout=20).ok:
            return h.name, []
        _refuse_live_run(node, hosts.dir)
        lines = release(node, keep_dist=False)
        return h.name, [*lines, f"removed {hosts.dir}"]

    out = dict(each(list(hosts.nodes), one))
    for name, lines in out.items():
        say(f"{name}: {'; '.join(lines) if lines else 'nothing of kchaos'}")
    return out


def read_manifest(node: KafkaNode, root: str) -> dict[str, Any] | None:
    """The manifest.json in `root` on `node`: None when there is none, {} when it cannot be read."""
    r = node.run(["cat", f"{root}/{MANIFEST}"], timeout=20)
    if not r.ok:
        return None
    try:
        m = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {}
    return m if isinstance(m, dict) else {}


def _refuse_live_run(node: KafkaNode, root: str) -> None:
    """HostCheckError when the manifest names a harness process of this machine that is still alive."""
    m = read_manifest(node, root) or {}
    pid = m.get("pid")
    if m.get("harness") == socket.gethostname() and isinstance(pid, int) and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except OSError:
            return
        raise HostCheckError(f"{node.name}: run {m.get('run')} is still active (harness pid {pid}); "
                             "stop it first (Ctrl-C or SIGTERM heals and cleans up)")
