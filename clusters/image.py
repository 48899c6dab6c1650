"""The node image, built without a container registry.

Base: a Debian root filesystem made with `mmdebstrap --variant=minbase` as a
tarball (/usr merged as debootstrap merges it), imported with `docker import`.
Node: the Kafka jars and the control script layered on top with a two-line
Dockerfile. Both tags carry a content hash of their inputs, so an image is
rebuilt only when something it is made of changed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kchaos.clusters import lazyfs
from kchaos.clusters.distribution import KafkaDist
from kchaos.clusters.kafka_node import NodeLayout
from kchaos.core.cache import cache_dir, cache_lock
from kchaos.core.kafka_versions import scripts_env

# Docker's SDK is imported in the functions that use it: it takes a fifth of a second to import, which a
# command that builds no image (a `kchaos check`, say) should not pay.
if TYPE_CHECKING:
    import docker

NODE_DIR = Path(__file__).with_name("node")
SUITE = "bookworm"
# openssh-server and sudo are for the SSH backend's test hosts (containers of this base running sshd);
# a Docker node never starts sshd, so in a node they are inert files. faketime brings libfaketime, which
# kafka-ctl preloads into every Kafka JVM so the clock faults can move that process's wall clock.
PACKAGES = ("openjdk-17-jre-headless", "iproute2", "iptables", "procps", "python3", "fuse3",
            "openssh-server", "sudo", "faketime")
# mmdebstrap's own hooks that merge /usr as debootstrap does, rather than installing the usrmerge package.
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
MIRROR = os.environ.get("KCHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# Images carry io.kchaos.image, not io.kchaos: a container inherits its image's labels, and io.kchaos
# marks a run's own containers (`kchaos cleanup` removes them, a new cluster refuses to start beside
# them). A test's container of the base image must not look like one.
IMAGE_LABEL = "io.kchaos.image"


class ImageError(RuntimeError):
    """The node image could not be built."""


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def base_tag() -> str:
    """Tag of the base image for the current inputs."""
    return f"kchaos-base:{_digest(SUITE, 'minbase', 'mmdebstrap', *PACKAGES)}"


def node_tag(base: str, dist: KafkaDist, lazyfs_bin: Path) -> str:
    """Tag of the node image: base + jars + every file in clusters/node/ + the lazyfs binary."""
    files = [p.name.encode() + p.read_bytes() for p in sorted(NODE_DIR.iterdir()) if p.is_file()]
    return f"kchaos-node:{dist.version}-{_digest(base, dist.fingerprint(), lazyfs_bin.read_bytes(), *files)}"


def _exists(client: docker.DockerClient, tag: str) -> bool:
    import docker.errors
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _as_root() -> list[str]:
    """The prefix that runs a command as root: none for root, `sudo -n` for a user with passwordless sudo (as
    `make setup` allows); ImageError for anyone else."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    raise ImageError("mmdebstrap needs root or passwordless sudo; run as root, with sudo, or pass --base-image")


def ensure_base(client: docker.DockerClient, say: Callable[[str], None] = print) -> str:
    """Return the base image tag, making the root filesystem and importing it if it is missing."""
    tag = base_tag()
    if _exists(client, tag):
        return tag
    with cache_lock(tag):
        if not _exists(client, tag):  # else made while this process waited for the lock
            _make_base(client, tag, say)
    return tag


def _make_base(client: docker.DockerClient, tag: str, say: Callable[[str], None]) -> None:
    tarball = cache_dir() / f"{tag.replace(':', '-')}.tar"
    if not tarball.exists():
        if shutil.which("mmdebstrap") is None:
            raise ImageError("mmdebstrap is not installed; run `make setup` (or pass --base-image)")
        as_root = _as_root()
        say(f"building Debian {SUITE} root filesystem with mmdebstrap (about 30 s)")
        tarball.parent.mkdir(parents=True, exist_ok=True)
        # apt's caches are left out (mmdebstrap's clean-up). openssh-server's install made host keys: every
        # container of the image would share them (and their private halves would ship in it), so they go too;
        # whoever runs sshd makes its own.
        cmd = ["mmdebstrap", "--quiet", "--mode=root", "--variant=minbase", f"--include={','.join(PACKAGES)}",
               f"--hook-dir={MERGED_USR_HOOKS}", '--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*',
               SUITE, "-", MIRROR]
        partial = tarball.with_suffix(".partial")
        with open(partial, "wb") as out:  # written by this user, whoever owns the files inside
            proc = subprocess.run([*as_root, *cmd], stdout=out, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise ImageError(f"mmdebstrap failed: {tail}")
        partial.rename(tarball)
    say(f"importing {tag}")
    repo, _, version = tag.partition(":")
    client.api.import_image_from_file(str(tarball), repository=repo, tag=version,
                                      changes=[f"LABEL {IMAGE_LABEL}=base", 'CMD ["sleep", "infinity"]'])
    if not _exists(client, tag):
        raise ImageError(f"docker import of {tarball} did not produce {tag}")


def ensure_node_image(client: docker.DockerClient, dist: KafkaDist, base_image: str | None = None,
                      say: Callable[[str], None] = print) -> str:
    """Return the node image tag for `dist`, building it (and its base) if missing.

    `base_image` names an existing image to build on (a Debian 12 with java,
    iproute2, iptables, procps, python3, fuse3 and faketime for the clock faults) instead of the made base.
    """
    import docker.errors
    base = base_image or ensure_base(client, say)
    if base_image and not _exists(client, base_image):
        try:
            client.images.pull(base_image)
        except docker.errors.APIError as e:
            raise ImageError(f"--base-image {base_image}: not present and cannot be pulled ({e.explanation})") from None
    try:
        lazyfs_bin = lazyfs.build()  # built on this Debian 12 host, run in the Debian 12 nodes
    except lazyfs.LazyfsBuildError as e:
        raise ImageError(str(e)) from None
    tag = node_tag(base, dist, lazyfs_bin)
    if _exists(client, tag):
        return tag
    with cache_lock(tag):
        if not _exists(client, tag):  # else built while this process waited for the lock
            _build_node(client, tag, base, dist, lazyfs_bin, say)
    return tag


def _build_node(client: docker.DockerClient, tag: str, base: str, dist: KafkaDist, lazyfs_bin: Path,
                say: Callable[[str], None]) -> None:
    import docker.errors
    say(f"building node image {tag}")
    with tempfile.TemporaryDirectory() as ctx:
        ctxp = Path(ctx)
        for f in NODE_DIR.iterdir():
            shutil.copy2(f, ctxp / f.name)
        shutil.copy2(lazyfs_bin, ctxp / "lazyfs")
        (ctxp / "libs").mkdir()
        for jar in dist.libs.glob("*.jar"):
            try:
                os.link(jar, ctxp / "libs" / jar.name)
            except OSError:
                shutil.copy2(jar, ctxp / "libs" / jar.name)
        try:
            client.images.build(path=ctx, tag=tag, buildargs={"BASE": base, **scripts_env(dist.version)},
                                labels={IMAGE_LABEL: "node"},
                                rm=True, forcerm=True, pull=False)
        except docker.errors.BuildError as e:
            log = " | ".join(str(x.get("stream", x.get("error", ""))).strip() for x in e.build_log if x)[-400:]
            raise ImageError(f"building {tag} failed: {log}") from None


def release_archive_path(image: str, dist: KafkaDist) -> Path:
    """Where the cache keeps the class archive of `dist`'s jars staged on a node of `image`."""
    return cache_dir() / "cds" / f"{image.replace(':', '-')}-{dist.version}-{dist.fingerprint()[:12]}.jsa"


def ensure_release_archive(client: docker.DockerClient, image: str, dist: KafkaDist,
                           say: Callable[[str], None] = print) -> Path:
    """The class archive (CDS) of Kafka `dist`'s start-up classes for a node of `image` on which a rolling upgrade
    staged `dist`'s jars (`NodeLayout.libs_for`): made once, cached, and put beside the staged jars, so that a node
    restarted on the new release starts as soon as one on the image's own.

    It is made as the image's own is (`kafka-ctl cds`), in a container of `image` without a network, with the
    cached jars mounted where a node stages them: an archive serves only the JVM and the jars, by path, size and
    time, that made it, and staging keeps each jar's size and time."""
    path = release_archive_path(image, dist)
    if path.exists():
        return path
    with cache_lock(path.name):
        if not path.exists():  # else made while this process waited for the lock
            _archive_release(client, image, dist, path, say)
    return path


def _archive_release(client: docker.DockerClient, image: str, dist: KafkaDist, path: Path,
                     say: Callable[[str], None]) -> None:
    import docker.errors
    say(f"archiving Kafka {dist.version}'s start-up classes for nodes of {image} that roll to it (once)")
    node = NodeLayout()
    libs = node.libs_for(dist)
    path.parent.mkdir(parents=True, exist_ok=True)
    script = f"{node.bin}/kafka-ctl cds && cp {node.archive_for(dist)} /out/kafka-cds.jsa"
    with tempfile.TemporaryDirectory(dir=path.parent) as out:
        try:
            client.containers.run(
                image, ["bash", "-c", script],
                environment={"KCHAOS_LIBS": libs, **scripts_env(dist.version)}, network_mode="none", remove=True,
                volumes={str(dist.libs.resolve()): {"bind": libs, "mode": "ro"}, out: {"bind": "/out", "mode": "rw"}})
        except docker.errors.ContainerError as e:
            tail = " | ".join((e.stderr or b"").decode(errors="replace").strip().splitlines()[-3:])
            raise ImageError(f"archiving Kafka {dist.version}'s classes on {image} failed: {tail}") from None
        os.replace(Path(out) / "kafka-cds.jsa", path)
