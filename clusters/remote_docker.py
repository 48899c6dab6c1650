"""Remote over the Docker Engine API: commands with `docker exec`, files with put_archive/get_archive.

The timeout is enforced inside the container by coreutils `timeout`, as every Remote's is, not
by a thread with a deadline in the harness: the Engine API has no way to kill an exec, so a
harness-side deadline would return while the command went on running in the node. The Docker
client's own socket timeout (docker_client() sets 300 s) is the backstop if dockerd itself hangs.
"""
from __future__ import annotations

import io
import posixpath
import socket
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container
from docker.utils.socket import consume_socket_output, demux_adaptor, frames_iter

from kchaos.clusters.remote import Command, HostUnreachable, Result, TransferFailed, finish, node_argv


class DockerRemote:
    """One container as a Remote. sudo=True runs the command as root (the container has no sudo)."""

    def __init__(self, container: Container | str, *, client: docker.DockerClient | None = None,
                 name: str | None = None, kill_after: float = 2.0):
        self._own_client = client is None and not isinstance(container, Container)
        if isinstance(container, Container):
            self.client = container.client
        else:
            self.client = client or docker.from_env(version="auto", timeout=300)
            try:
                container = self.client.containers.get(container)
            except docker.errors.NotFound:
                raise HostUnreachable(f"{name or container}: container {container} does not exist") from None
        self.container = container
        self.name = name or container.name
        nets = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
        self.address = next((n["IPAddress"] for n in nets.values() if n.get("IPAddress")), container.name)
        self.kill_after = kill_after

    def __repr__(self) -> str:
        return f"DockerRemote({self.name}, {self.container.short_id})"

    def _gone(self) -> HostUnreachable:
        return HostUnreachable(f"{self.name} ({self.address}): container {self.container.name} is gone")

    def run(self, cmd: Command, *, timeout: float, check: bool = False, sudo: bool = False,
            stdin: bytes | None = None) -> Result:
        """Run `cmd` in the container under `timeout`; see Remote.run."""
        argv = node_argv(cmd, timeout, self.kill_after, sudo=False)
        api = self.client.api
        start = time.monotonic()
        try:
            exec_id = api.exec_create(self.container.id, argv, stdin=stdin is not None, stdout=True,
                                      stderr=True, user="root" if sudo else "")["Id"]
            if stdin is None:
                out, err = api.exec_start(exec_id, demux=True)
            else:
                out, err = self._with_stdin(exec_id, stdin)
            code = self._exit_code(exec_id)
        except docker.errors.NotFound:
            raise self._gone() from None
        except docker.errors.APIError as e:
            if e.status_code == 409:  # not running
                raise self._gone() from None
            raise
        return finish(self.name, cmd, code, out or b"", err or b"", timeout=timeout,
                      elapsed=time.monotonic() - start, check=check)

    def _with_stdin(self, exec_id: str, data: bytes) -> tuple[bytes | None, bytes | None]:
        sock = self.client.api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)

        # Written from a thread: a command that writes a lot before reading all of its input would
        # otherwise fill the pipe we are not reading while we block writing.
        def feed() -> None:
            try:
                raw.sendall(data)
                raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the command exited without reading everything

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        try:
            return consume_socket_output((demux_adaptor(*f) for f in frames_iter(sock, tty=False)), demux=True)
        finally:
            writer.join(timeout=5)
            sock.close()

    def _exit_code(self, exec_id: str) -> int:
        # The output stream can end a moment before the Engine records the exit code.
        for _ in range(100):
            info = self.client.api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return info["ExitCode"]
            time.sleep(0.02)
        return -1

    def put(self, local: Path, remote: str, mode: int | None = None) -> None:
        """Copy `local` to `remote` in the container (owned by root); see Remote.put."""
        local = Path(local)
        st = local.stat()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(posixpath.basename(remote))
            info.size, info.mtime = st.st_size, int(st.st_mtime)
            info.mode = (st.st_mode & 0o7777) if mode is None else mode
            with local.open("rb") as f:
                tar.addfile(info, f)
        where = posixpath.dirname(remote) or "/"
        try:
            ok = self.container.put_archive(where, buf.getvalue())
        except docker.errors.NotFound:
            raise TransferFailed(f"{self.name}: put {local} -> {remote}: no directory {where}") from None
        except docker.errors.APIError as e:
            raise TransferFailed(f"{self.name}: put {local} -> {remote}: {e.explanation}") from None
        if not ok:
            raise TransferFailed(f"{self.name}: put {local} -> {remote}: refused by the Engine")

    def get(self, remote: str, local: Path) -> None:
        """Copy the regular file `remote` out of the container to `local`; see Remote.get."""
        try:
            stream, _ = self.container.get_archive(remote)
            # Spooled: a node's logs can be large, and the archive is read twice (written, then parsed).
            with tempfile.SpooledTemporaryFile(max_size=16 << 20) as tmp:
                for chunk in stream:
                    tmp.write(chunk)
                tmp.seek(0)
                with tarfile.open(fileobj=tmp, mode="r|") as tar:
                    member = tar.next()
                    if member is None or not member.isfile():
                        raise TransferFailed(f"{self.name}: get {remote}: not a regular file")
                    src = tar.extractfile(member)
                    assert src is not None
                    with Path(local).open("wb") as out:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
        except docker.errors.NotFound:
            raise TransferFailed(f"{self.name}: get {remote}: no such file") from None
        except docker.errors.APIError as e:
            raise TransferFailed(f"{self.name}: get {remote}: {e.explanation}") from None

    def close(self) -> None:
        """Close the Docker client if this Remote made it; the container is left as it is."""
        if self._own_client:
            self.client.close()
