"""The node transports against real parts: an sshd of our own on 127.0.0.1, and a Docker container.

The sshd runs from /usr/sbin/sshd (`make setup` installs openssh-server with its service off) on a
free unprivileged port, with a host key, client keys and config the fixture makes in a temp dir.
"""
from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import paramiko
import pytest

from kchaos.clusters import remote_ssh
from kchaos.clusters.remote import (
    AuthFailed,
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    HostKeyChanged,
    HostKeyUnknown,
    HostUnreachable,
    Remote,
    TransferFailed,
)
from kchaos.clusters.remote_ssh import SshPool, SshRemote, fingerprint

SSHD = Path("/usr/sbin/sshd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kchaos-test", "-f", str(path)],
                   check=True)
    return path


class Sshd:
    """An sshd on 127.0.0.1:port that lets `client_key` in as the current user."""

    def __init__(self, d: Path):
        self.dir, self.port = d, free_port()
        self.host_key = keygen(d / "host_ed25519")
        self.client_key = keygen(d / "client_ed25519")
        (d / "authorized_keys").write_text((d / "client_ed25519.pub").read_text())
        # A stand-in sudo first on the PATH: it records its argv, then runs what follows `--`.
        bin_ = d / "bin"
        bin_.mkdir()
        (bin_ / "sudo").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" > {d}/sudo.argv\n'
                                   f'[ -e {d}/sudo.hang ] && echo $$ > {d}/sudo.pid && exec sleep 30\n'
                                   '[ "$1" = -n ] && [ "$2" = -- ] || exit 99\nshift 2\nexec "$@"\n')
        (bin_ / "sudo").chmod(0o755)
        self.config = d / "sshd_config"
        self.config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {d}/authorized_keys", f"PidFile {d}/sshd.pid",
            "StrictModes no", "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes", "PermitRootLogin prohibit-password", "Subsystem sftp internal-sftp",
            f"SetEnv PATH={bin_}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", ""]))
        self.proc: subprocess.Popen | None = None

    def known_hosts_line(self) -> str:
        kind, blob = (self.dir / "host_ed25519.pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {blob}\n"

    def start(self) -> None:
        log = (self.dir / "sshd.log").open("ab")
        self.proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(self.config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"sshd exited {self.proc.returncode}: {(self.dir / 'sshd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        pytest.fail("sshd did not listen within 10 s")

    def kill(self) -> None:
        """SIGKILL the listener and the per-connection sshds it forked (they outlive it otherwise)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        children = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        for pid in [self.proc.pid, *map(int, children.stdout.split())]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def restart(self) -> None:
        self.kill()
        self.start()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not SSHD.exists():
        pytest.fail("no /usr/sbin/sshd: run `make setup` (it installs openssh-server with its service off)")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir, as root
    d = tmp_path_factory.mktemp("sshd")
    server = Sshd(d)
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def known_hosts(sshd, tmp_path) -> Path:
    p = tmp_path / "known_hosts"
    p.write_text(sshd.known_hosts_line())
    return p


@pytest.fixture
def pool():
    p = SshPool()
    yield p
    p.close_all()


@pytest.fixture
def remote(sshd, known_hosts, pool):
    return SshRemote("n1", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=known_hosts,
                     connect_timeout=3, kill_after=1, pool=pool)


def test_run_exit_code_stdout_stderr(remote):
    assert isinstance(remote, Remote)
    r = remote.run("echo out; echo err >&2; exit 3", timeout=10)
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)
    # An argv reaches the host word for word, whatever its quoting.
    assert remote.run(["printf", "%s|", "a b", "it's", "$HOME"], timeout=10).stdout == "a b|it's|$HOME|"
    with pytest.raises(CommandFailed) as e:
        remote.run(["sh", "-c", "echo nope >&2; exit 7"], timeout=10, check=True)
    assert (e.value.result.exit_code, e.value.result.stderr) == (7, "nope\n")
    assert str(e.value).startswith("n1: `sh -c 'echo nope >&2; exit 7'` exited 7: nope")


def test_stdin_is_fed_and_closed(remote):
    # 2 MB both ways: more than any pipe or SSH window holds, so feeding must not wait for reading.
    data = base64.b64encode(os.urandom(1_500_000))
    r = remote.run(["cat"], timeout=30, stdin=data)
    assert r.stdout.encode() == data
    # Without stdin a command reads EOF at once instead of hanging.
    assert remote.run(["cat"], timeout=5).stdout == ""


def test_timeout_kills_the_process_group_and_raises(remote):
    start = time.monotonic()
    with pytest.raises(CommandTimeout) as e:
        remote.run("echo started; sleep 97 & sleep 98", timeout=1)
    assert 1 <= time.monotonic() - start < 5
    assert e.value.stdout == "started\n" and e.value.timeout == 1
    # The background child died with the foreground one.
    assert remote.run(["pgrep", "-f", "sleep 9[78]"], timeout=5).exit_code == 1
    # A command that exits 124 by itself, in time, is not a timeout.
    assert remote.run("exit 124", timeout=5).exit_code == 124


def test_put_get_round_trip_with_mode(remote, tmp_path):
    d = remote.run(["mktemp", "-d"], timeout=5, check=True).stdout.strip()
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(300_000))
    remote.put(src, f"{d}/a.bin", mode=0o640)
    assert remote.run(["stat", "-c", "%a %s", f"{d}/a.bin"], timeout=5).stdout == "640 300000\n"
    back = tmp_path / "back.bin"
    remote.get(f"{d}/a.bin", back)
    assert back.read_bytes() == src.read_bytes()
    src.chmod(0o751)  # mode=None copies the local file's bits
    remote.put(src, f"{d}/b.bin")
    assert remote.run(["stat", "-c", "%a", f"{d}/b.bin"], timeout=5).stdout == "751\n"
    with pytest.raises(TransferFailed, match=r"n1 \(127.0.0.1:\d+\): put .* -> /nonexistent/x"):
        remote.put(src, "/nonexistent/x")
    with pytest.raises(TransferFailed, match="get /nonexistent/x"):
        remote.get("/nonexistent/x", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    remote.run(["rm", "-r", d], timeout=5, check=True)


def test_one_connection_serves_every_command_and_remote(remote, sshd, known_hosts, pool):
    t = remote.transport
    remote.run(["true"], timeout=5, check=True)
    remote.put(known_hosts, "/tmp/kchaos-test-reuse")
    remote.run(["rm", "/tmp/kchaos-test-reuse"], timeout=5, check=True)
    assert remote.transport is t and t.is_active()
    # Another Remote for the same user, address and port shares it; one in another pool does not.
    twin = SshRemote("n1-again", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=known_hosts,
                     pool=pool)
    assert twin.run(["true"], timeout=5).ok and twin.transport is t
    other = SshRemote("n1", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=known_hosts,
                      pool=SshPool())
    assert other.transport is not t
    other.close()
    assert t.is_active()


def test_restarted_sshd_is_reconnected_transparently(remote, sshd):
    before = remote.transport
    assert remote.run(["echo", "one"], timeout=5).stdout == "one\n"
    sshd.restart()
    assert remote.run(["echo", "two"], timeout=5).stdout == "two\n"
    assert remote.transport is not before


def test_sudo_runs_sudo_n(remote, sshd):
    r = remote.run("id -u", timeout=5, sudo=True, check=True)
    assert r.stdout == f"{os.geteuid()}\n"
    assert (sshd.dir / "sudo.argv").read_text().startswith("-n -- timeout -k 1 5.000 sh -c id -u")


def test_channel_deadline_when_the_node_does_not_kill(remote, sshd, monkeypatch):
    # The stand-in sudo ignores the command, `timeout` included, and sleeps: nothing on the node
    # ends it, so the harness must give up on its own deadline (timeout + kill_after + grace).
    monkeypatch.setattr(remote_ssh, "CHANNEL_GRACE_S", 0.5)
    (sshd.dir / "sudo.hang").touch()
    try:
        start = time.monotonic()
        with pytest.raises(CommandTimeout):
            remote.run(["true"], timeout=1, sudo=True)
        assert 2.5 <= time.monotonic() - start < 5
    finally:
        (sshd.dir / "sudo.hang").unlink()
        os.kill(int((sshd.dir / "sudo.pid").read_text()), signal.SIGKILL)  # the sleep we left behind
    assert remote.run(["echo", "after"], timeout=5).stdout == "after\n"


def test_connection_dropped_mid_command_is_not_retried(remote, sshd, tmp_path):
    mark = tmp_path / "runs"
    remote.run(["true"], timeout=5, check=True)

    def restart_once_it_runs() -> None:
        deadline = time.monotonic() + 10
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        sshd.restart()

    restart = threading.Thread(target=restart_once_it_runs)
    restart.start()
    start = time.monotonic()
    with pytest.raises(ConnectionLost, match=r"^n1 \(127.0.0.1:\d+\): connection lost while running"):
        remote.run(f"echo x >> {mark}; sleep 5", timeout=10)
    assert time.monotonic() - start < 4  # not the 5 s the command would have taken
    assert mark.read_text() == "x\n"  # it ran once; it was not run again
    restart.join()
    assert remote.run(["true"], timeout=5).ok


def test_handshake_failures_are_retried_then_unreachable(known_hosts, sshd):
    # A listener that accepts and hangs up before the SSH banner: transient, so retried.
    accepted = []
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(time.monotonic())
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    r = SshRemote("n2", "127.0.0.1", port=port, key=sshd.client_key, known_hosts=known_hosts,
                  connect_timeout=2, pool=SshPool())
    try:
        with pytest.raises(HostUnreachable, match=rf"^n2 \(127.0.0.1:{port}\): SSH handshake failed 3 times"):
            r.run(["true"], timeout=5)
    finally:
        srv.close()
    assert len(accepted) == remote_ssh.HANDSHAKE_ATTEMPTS == 3
    assert accepted[-1] - accepted[0] >= 1.4  # tenacity's backoff: 0.5 s, then 1 s


def test_wrong_key_is_refused(sshd, known_hosts, tmp_path):
    other = keygen(tmp_path / "other")
    r = SshRemote("n1", "127.0.0.1", port=sshd.port, key=other, known_hosts=known_hosts, pool=SshPool())
    with pytest.raises(AuthFailed, match=rf"^n1 \(127.0.0.1:{sshd.port}\): login as \S+ with key {other} refused$"):
        r.run(["true"], timeout=5)
    missing = SshRemote("n1", "127.0.0.1", port=sshd.port, key=tmp_path / "nope", known_hosts=known_hosts,
                        pool=SshPool())
    with pytest.raises(AuthFailed, match="key file .*nope does not exist"):
        missing.run(["true"], timeout=5)


def test_unknown_host_key_is_refused_unless_accepted(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    strict = SshRemote("n1", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=kh, pool=SshPool())
    with pytest.raises(HostKeyUnknown) as e:
        strict.run(["true"], timeout=5)
    assert str(e.value).startswith(f"n1 (127.0.0.1:{sshd.port}): host key not in {kh} (ssh-ed25519 SHA256:")
    assert str(e.value).endswith("set accept_unknown_host_keys: true in the hosts file to trust it")
    assert strict.accepted_host_key is None

    trusting = SshRemote("n1", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=kh,
                         accept_unknown_host_keys=True, pool=SshPool())
    assert trusting.run(["echo", "in"], timeout=5).stdout == "in\n"
    host_key = paramiko.PKey.from_path(sshd.host_key)
    assert trusting.accepted_host_key == fingerprint(host_key)
    assert kh.read_text() == ""  # trusted for this process only; known_hosts is not written


def test_a_key_accepted_on_trust_is_pinned_for_reconnects(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    r = SshRemote("n1", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=kh,
                  accept_unknown_host_keys=True, pool=SshPool())
    assert r.run(["true"], timeout=5).ok
    first = r.accepted_host_key
    saved = sshd.host_key.read_bytes(), sshd.host_key.with_suffix(".pub").read_bytes()
    try:
        sshd.host_key.unlink()
        keygen(sshd.host_key.parent / "host_ed25519")  # the host now answers with another key
        sshd.restart()
        with pytest.raises(HostKeyChanged, match="is not the one accepted earlier in this run$"):
            r.run(["true"], timeout=5)
        assert r.accepted_host_key == first
    finally:
        sshd.host_key.write_bytes(saved[0])
        sshd.host_key.with_suffix(".pub").write_bytes(saved[1])
        sshd.restart()


def test_changed_host_key_is_refused(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    impostor = keygen(tmp_path / "impostor")
    kind, blob = (tmp_path / "impostor.pub").read_text().split()[:2]
    kh.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    for accept in (False, True):  # accepting unknown keys never accepts a changed one
        r = SshRemote("n1", "127.0.0.1", port=sshd.port, key=sshd.client_key, known_hosts=kh,
                      accept_unknown_host_keys=accept, pool=SshPool())
        with pytest.raises(HostKeyChanged, match=rf"^n1 \(127.0.0.1:{sshd.port}\): host key changed"):
            r.run(["true"], timeout=5)
    assert impostor.exists()


def test_closed_port_is_unreachable_quickly(sshd, known_hosts):
    port = free_port()
    r = SshRemote("n9", "127.0.0.1", port=port, key=sshd.client_key, known_hosts=known_hosts,
                  connect_timeout=2, pool=SshPool())
    start = time.monotonic()
    with pytest.raises(HostUnreachable, match=rf"^n9 \(127.0.0.1:{port}\): unreachable: Connection refused$"):
        r.run(["true"], timeout=5)
    assert time.monotonic() - start < 1.0  # refused is final: no retries, no waiting


# --- Docker ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def container():
    from kchaos.clusters.engine import EngineError, docker_client
    from kchaos.clusters.image import ensure_base
    try:
        client = docker_client()
    except EngineError as e:
        pytest.skip(str(e))
    # Not labelled io.kchaos: a kchaos run would take it for another run's cluster. It removes itself
    # when `sleep` ends, should this process die before the teardown.
    c = client.containers.run(ensure_base(client), ["sleep", "600"], detach=True, auto_remove=True,
                              network_mode="none", labels={"io.kchaos.test": "remote"})
    try:
        yield c
    finally:
        c.remove(force=True)


def test_docker_remote_runs_times_out_and_moves_files(container, tmp_path):
    from kchaos.clusters.remote_docker import DockerRemote
    r = DockerRemote(container, name="d1")
    assert isinstance(r, Remote)
    res = r.run("echo out; echo err >&2; exit 3", timeout=10)
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert r.run(["printf", "%s|", "a b", "$HOME"], timeout=5).stdout == "a b|$HOME|"
    with pytest.raises(CommandFailed, match="^d1: `false` exited 1$"):
        r.run(["false"], timeout=5, check=True)
    data = base64.b64encode(os.urandom(300_000))
    assert r.run(["cat"], timeout=10, stdin=data).stdout.encode() == data

    start = time.monotonic()
    with pytest.raises(CommandTimeout):
        r.run("sleep 97 & sleep 98", timeout=1)
    assert 1 <= time.monotonic() - start < 5
    assert r.run("ps -eo args | grep -c '^sleep 9[78]'", timeout=5).stdout == "0\n"

    src = tmp_path / "f"
    src.write_bytes(os.urandom(100_000))
    r.put(src, "/tmp/f", mode=0o604)
    assert r.run(["stat", "-c", "%a %s", "/tmp/f"], timeout=5).stdout == "604 100000\n"
    r.get("/tmp/f", tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == src.read_bytes()
    with pytest.raises(TransferFailed, match="^d1: put .* no directory /nope$"):
        r.put(src, "/nope/f")
    with pytest.raises(TransferFailed, match="^d1: get /nope: no such file$"):
        r.get("/nope", tmp_path / "x")
    r.close()
