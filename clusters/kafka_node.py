"""Kafka on one node, over any Remote, as kafkatest's services sit on `node.account`.

A `KafkaNode` installs the Kafka jars and the node scripts (kafka-ctl, fault-ctl, lazyfs) where
its `NodeLayout` says, writes the node's config, formats its storage, starts, stops, kills,
pauses and resumes Kafka, runs faults through fault-ctl, and copies files off the node. It never
knows whether the Remote is a container (`docker exec`) or a host (SSH).
"""
from __future__ import annotations

import logging
import posixpath
import re
import shlex
import tarfile
import tempfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from kchaos.clusters.distribution import KafkaDist
from kchaos.clusters.kraft import NodeSpec
from kchaos.clusters.remote import Command, Remote, RemoteError, Result

log = logging.getLogger("kchaos.node")
NODE_DIR = Path(__file__).with_name("node")
SCRIPTS = ("kafka-ctl", "fault-ctl", "log4j.properties", "log4j-tools.properties", "log4j2.properties",
           "log4j2-tools.properties")
CTL_TIMEOUT_S = 150.0  # kafka-ctl stop waits up to 60 s, format runs a JVM


class NodeError(RuntimeError):
    """Kafka on a node could not be installed or controlled; the message quotes the node's output."""


@dataclass(frozen=True)
class NodeLayout:
    """Where kchaos keeps things on a node. The defaults are the node image's paths (a Docker node);
    `under(root)` puts everything in one directory kchaos owns (an SSH host)."""

    bin: str = "/opt/kchaos"  # the node scripts and lazyfs
    libs: str = "/opt/kafka/libs"  # Kafka's jars
    conf: str = "/kchaos"  # server.properties and the logs
    data: str = "/var/lib/kafka"  # data/ (log.dirs) and lazyfs's backing/
    run: str = "/run"  # lazyfs's control FIFO, pid files
    root: str | None = None  # the directory kchaos owns, when it owns one (removed at cleanup)

    @classmethod
    def under(cls, root: str, dist: KafkaDist | None = None) -> NodeLayout:
        """Everything below `root`; the jars in a folder named after the distribution, so a host
        keeps the jars of every version it ran (uploaded once each). Without `dist`: the layout
        to clean up, whatever version it ran."""
        libs = f"{root}/dist/{dist.version}-{dist.fingerprint()[:12]}/libs" if dist else f"{root}/dist"
        return cls(bin=f"{root}/bin", libs=libs,
                   conf=f"{root}/conf", data=f"{root}/data", run=f"{root}/run", root=root)

    @property
    def data_dir(self) -> str:
        """Kafka's log.dirs."""
        return f"{self.data}/data"

    def archive_for(self, dist: KafkaDist) -> str:
        """Where the class archive of `dist`'s jars staged by `libs_for` goes: beside that folder, where kafka-ctl
        looks for it."""
        return f"{posixpath.dirname(self.libs_for(dist))}/kafka-cds.jsa"

    def libs_for(self, dist: KafkaDist) -> str:
        """Where another release's jars go beside the ones Kafka starts with (a rolling upgrade): a folder
        per distribution, below the directory kchaos owns, or the node image's /opt/kafka/dist."""
        return f"{self.root or '/opt/kafka'}/dist/{dist.version}-{dist.fingerprint()[:12]}/libs"

    def env(self, extra: dict[str, str]) -> str:
        """The node.env the scripts source: this layout plus `extra` (storage, heap, ...)."""
        env = {"KCHAOS_LIBS": self.libs, "KCHAOS_CONF": self.conf, "KCHAOS_DATA": self.data,
               "KCHAOS_RUN": self.run, **({"KCHAOS_FORMAT_CACHE": f"{self.root}/formats"} if self.root else {}),
               **extra}
        return "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in sorted(env.items()))


# GNU tar's warning for a file whose status changed while it read it; with nothing else wrong it exits 1.
TAR_CHANGED = re.compile(r"tar: (.+): file changed as we read it")


def changed_while_read(r: Result) -> list[str] | None:
    """The files a `tar -c` says changed while it read them, when that is all it says and its exit is 1 (GNU tar's
    "some files differ": the archive is whole, and each such file in it is what tar read, a prefix of a log that
    grew); [] when it exited 0; None for any other failure. A running Kafka appends to its metadata log every
    half second, so a copy of a live data directory may meet one."""
    if r.ok:
        return []
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    found = [m.group(1) for ln in lines if (m := TAR_CHANGED.fullmatch(ln.strip()))]
    return found if r.exit_code == 1 and found and len(found) == len(lines) else None


class KafkaNode:
    """Kafka on the node `spec`, reached through `remote`, laid out as `layout`. With `sudo`, every
    command runs as root (`sudo -n`): faults need iptables, tc and FUSE."""

    owns_kafka = True  # kchaos made this Kafka: teardown stops it (an operator's own is left running)

    def __init__(self, spec: NodeSpec, remote: Remote, layout: NodeLayout = NodeLayout(), *, sudo: bool = False):
        self.spec, self.remote, self.layout, self.sudo = spec, remote, layout, sudo

    @property
    def name(self) -> str:
        """The node's name in the test (n1)."""
        return self.spec.name

    @property
    def data_dir(self) -> str:
        """Kafka's log directory on the node."""
        return self.layout.data_dir

    def run(self, cmd: Command, *, timeout: float = 60.0, check: bool = False, stdin: bytes | None = None) -> Result:
        """Run `cmd` on the node (as root when the node says sudo)."""
        return self.remote.run(cmd, timeout=timeout, check=check, sudo=self.sudo, stdin=stdin)

    def exec(self, cmd: Command, timeout: float = 60.0) -> tuple[int, str]:
        """Run `cmd`; return its exit code and stdout followed by stderr (NodeError if the node is gone)."""
        try:
            r = self.run(cmd, timeout=timeout)
        except RemoteError as e:
            raise NodeError(str(e)) from None
        return r.exit_code, r.stdout + r.stderr

    def script(self, name: str, *args: str, ok: tuple[int, ...] = (0,), timeout: float = CTL_TIMEOUT_S) -> str:
        """Run node script `name` (kafka-ctl, fault-ctl) with `args`; NodeError quoting it on another exit code."""
        code, out = self.exec([f"{self.layout.bin}/{name}", *args], timeout)
        if code not in ok:
            raise NodeError(f"{self.name}: {name} {' '.join(args)} failed ({code}): {out.strip()[-300:]}")
        log.info("%s: %s %s -> %s", self.name, name, " ".join(args), out.strip()[-200:])
        return out.strip()

    # --- install and configure ---------------------------------------------------------
    def install(self, dist: KafkaDist, lazyfs_bin: Path | None) -> bool:
        """Put the node scripts and the jars in the directory kchaos owns: the scripts every time,
        the jars unless this distribution is there already (a host keeps them from an earlier run).
        A node laid out as the node image (no owned root) has both: nothing is uploaded. Return
        whether the jars were uploaded."""
        if self.layout.root is None:  # the node image's own paths: the image holds them
            return False
        jar = f"{self.layout.libs}/kafka_2.13-{dist.version}.jar"
        self.run(["mkdir", "-p", self.layout.bin, self.layout.libs, self.layout.conf, self.layout.data,
                  self.layout.run], check=True)
        self._install_scripts(lazyfs_bin)
        if self.run(["test", "-f", jar]).ok:
            return False
        self._put_libs(dist, self.layout.libs)
        return True

    def install_libs(self, dist: KafkaDist, archive: Path | None = None) -> str:
        """Put `dist`'s jars in their own folder on the node, unless they are there, and `archive` (their class
        archive, made for this folder) beside them; return the folder."""
        libs = self.layout.libs_for(dist)
        if not self.run(["test", "-f", f"{libs}/kafka_2.13-{dist.version}.jar"]).ok:
            self.run(["mkdir", "-p", libs], check=True)
            self._put_libs(dist, libs)
        if archive is not None:
            self.remote.put(archive, self.layout.archive_for(dist), 0o644)
        return libs

    def use_libs(self, libs: str, env: dict[str, str]) -> None:
        """Have the node scripts run the jars in `libs`, with `env` (the node.env settings besides the layout),
        from the next start of Kafka or of a tool."""
        self.layout = replace(self.layout, libs=libs)
        self.write(f"{self.layout.bin}/node.env", self.layout.env(env))

    def _put_libs(self, dist: KafkaDist, dest: str) -> None:
        self._untar(_tar({p.name: p for p in sorted(dist.libs.iterdir()) if p.is_file()}), dest)

    def _install_scripts(self, lazyfs_bin: Path | None) -> None:
        files = {name: NODE_DIR / name for name in SCRIPTS}
        if lazyfs_bin is not None:
            files["lazyfs"] = lazyfs_bin
        self._untar(_tar(files), self.layout.bin)

    def _untar(self, tar: Path, dest: str) -> None:
        """Upload a tar file and unpack it into `dest` (as root when sudo: the upload itself is the login's)."""
        tmp = f"/tmp/kchaos-upload-{uuid.uuid4().hex[:8]}.tar"
        try:
            self.remote.put(tar, tmp, 0o644)
            self.run(["tar", "-xf", tmp, "-C", dest, "--no-same-owner"], timeout=300, check=True)
        finally:
            self.remote.run(["rm", "-f", tmp], timeout=30)
            tar.unlink(missing_ok=True)

    def write(self, path: str, text: str) -> None:
        """Write `text` to the file `path` on the node."""
        self.run(["sh", "-c", 'cat > "$1"', "sh", path], stdin=text.encode(), check=True)

    def configure(self, properties: str, env: dict[str, str]) -> None:
        """Write server.properties and the scripts' node.env (the layout and `env`)."""
        self.run(["mkdir", "-p", self.layout.conf], check=True)
        self.write(f"{self.layout.conf}/server.properties", properties)
        self.write(f"{self.layout.bin}/node.env", self.layout.env(env))

    def format(self, cluster_id: str, features: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> None:
        """Format the node's storage with `cluster_id` (mounting lazyfs first when the storage is lazyfs), with each
        of `features` ("NAME=LEVEL") instead of the release's default level, and the storage tool's `extra`
        arguments (a dynamic quorum's initial controllers)."""
        self.script("kafka-ctl", "format", cluster_id, *(a for f in features for a in ("--feature", f)), *extra)

    def wipe(self, cluster_id: str, keep_metadata: bool, features: tuple[str, ...] = (),
             extra: tuple[str, ...] = ()) -> str:
        """Empty the node's storage as a replaced disk leaves it, Kafka stopped: every directory formatted anew
        with `cluster_id`, `features` and the storage tool's `extra` arguments (a new directory id), or with
        `keep_metadata` only the partitions' logs and checkpoints removed. Returns the script's answer."""
        return self.script("kafka-ctl", "wipe", cluster_id, "data" if keep_metadata else "all",
                           *(a for f in features for a in ("--feature", f)), *extra)

    # --- the Kafka process ----------------------------------------------------------------
    def start(self) -> None:
        """Start Kafka unless it is running."""
        self.script("kafka-ctl", "start")

    def kill(self) -> None:
        """SIGKILL Kafka (no-op if it is not running)."""
        self.script("kafka-ctl", "kill", ok=(0, 3))

    def stop(self) -> None:
        """SIGTERM Kafka and wait for a clean shutdown (SIGKILL after 60 s)."""
        self.script("kafka-ctl", "stop", ok=(0, 3))

    def pause(self) -> None:
        """SIGSTOP Kafka."""
        self.script("kafka-ctl", "pause")

    def resume(self) -> None:
        """SIGCONT Kafka (no-op if it is not running)."""
        self.script("kafka-ctl", "resume", ok=(0, 3))

    def is_running(self) -> bool:
        """Whether a Kafka process of ours exists on the node (a paused one counts)."""
        return self.exec([f"{self.layout.bin}/kafka-ctl", "status"])[0] == 0

    def fault_ctl(self, *args: str) -> str:
        """Run `fault-ctl ARGS`, the node's fault script; NodeError quoting it on failure."""
        return self.script("fault-ctl", *args, timeout=60.0)

    # --- files -------------------------------------------------------------------------------
    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the node's server.log and stdout.log (which holds JVM crashes)."""
        out = []
        for name in ("server.log", "stdout.log"):
            code, text = self.exec(["tail", "-n", str(lines), f"{self.layout.conf}/{name}"], 20)
            if code == 0 and text.strip():
                out.append(f"[{name}]\n{text.rstrip()}")
        return "\n".join(out) or "(no log written)"

    def log_lines(self, pattern: str) -> str:
        """The lines of the node's server.log that match the extended regular expression `pattern` ("" if none)."""
        code, text = self.exec(["grep", "-E", "--", pattern, f"{self.layout.conf}/server.log"], 20)
        return text if code == 0 else ""

    def copy_out(self, directory: str, files: list[str], dest: Path) -> int:
        """Copy `files` (relative to `directory`) off the node into `dest`; return the tar's size.
        Read by tar on the node, so through any mount made there (lazyfs over the data directory)."""
        if not files:
            return 0
        tmp = f"/tmp/kchaos-copy-{uuid.uuid4().hex[:8]}.tar"
        try:
            r = self.run(["tar", "-cf", tmp, "-C", directory, "--", *files], timeout=300)
            changed = changed_while_read(r)
            if not r.ok and changed is None:
                raise NodeError(f"{self.name}: tar of {directory} failed ({r.exit_code}): {r.stderr[-300:]}")
            if changed:
                log.warning("%s: copied as they were when read, for they changed while tar read them: %s",
                            self.name, ", ".join(changed))
            self.run(["chmod", "644", tmp], check=True)
            dest.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as d:
                local = Path(d) / "copy.tar"
                self.remote.get(tmp, local)
                with tarfile.open(local) as tf:
                    tf.extractall(dest, filter="data")
                return local.stat().st_size
        except RemoteError as e:
            raise NodeError(str(e)) from None
        finally:
            try:
                self.run(["rm", "-f", tmp], timeout=30)
            except RemoteError:
                pass

    def fetch_conf(self, dest: Path) -> int:
        """Copy the node's config and logs (its conf directory) into `dest`; return the tar's size."""
        code, out = self.exec(["ls", "-1", self.layout.conf], 20)
        names = [n for n in out.split() if n] if code == 0 else []
        return self.copy_out(self.layout.conf, names, dest)

    def remove_root(self) -> None:
        """Delete the directory kchaos owns on the node (nothing when the layout has none)."""
        root = self.layout.root
        if root and posixpath.isabs(root) and root.rstrip("/") not in ("", "/"):
            self.run(["rm", "-rf", "--one-file-system", root], timeout=120)


def _tar(files: dict[str, Path]) -> Path:
    """A tar file holding `files` under their names, executable bits kept."""
    fd, name = tempfile.mkstemp(suffix=".tar", prefix="kchaos-")
    with open(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w") as tf:
        for arc, path in files.items():
            tf.add(path, arcname=arc)
    return Path(name)


__all__ = ["KafkaNode", "NodeLayout", "NodeError"]
