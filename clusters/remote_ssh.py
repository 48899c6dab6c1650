"""Remote over SSH (paramiko): one pooled connection per (user, address, port), files over SFTP.

Connecting is two steps with different failure policies. The TCP connect either works or the
host is unreachable (refused, no route, timeout): no retry, the caller hears at once. The SSH
handshake on a connected socket can fail transiently (sshd's MaxStartups dropping a burst of
connections, a reset mid-banner): that, and only that, is retried with tenacity. A login the
host refuses, an unknown or changed host key, and a command's non-zero exit are never retried,
and neither is a command whose connection dropped under it (it may have run).

Host keys are checked against a known_hosts file (default ~/.ssh/known_hosts). An unknown key
is accepted only with accept_unknown_host_keys=True, and then only in memory for this process
(known_hosts is never written); `accepted_host_key` tells which key was taken on trust. A
reconnect checks the host against that key too, so a key that changes mid-run is refused.
"""
from __future__ import annotations

import getpass
import select
import socket
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from kchaos.clusters.remote import (
    AuthFailed,
    Command,
    CommandTimeout,
    ConnectionLost,
    HostKeyChanged,
    HostKeyUnknown,
    HostUnreachable,
    Result,
    TransferFailed,
    finish,
    node_argv,
    render,
)
from kchaos.core.hosts import Host, HostsFile

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
HANDSHAKE_ATTEMPTS = 3
# After the node's `timeout` should have killed the command, how long the harness still waits for
# the channel to report it before closing the channel itself.
CHANNEL_GRACE_S = 5.0


class _Transient(Exception):
    """A handshake failure on a connected socket: worth another try."""


@dataclass(eq=False)
class _Connection:
    """The pooled state for one (user, address, port): the client, and the host key taken on trust."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    client: paramiko.SSHClient | None = None
    accepted: paramiko.PKey | None = None


class SshPool:
    """SSH connections keyed by (user, address, port) and the login and host-key settings, shared by
    every SshRemote given this pool."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: dict[tuple, _Connection] = {}

    def entry(self, key: tuple) -> _Connection:
        """The pool entry for `key`, made empty on first use."""
        with self._lock:
            return self._conns.setdefault(key, _Connection())

    def close_all(self) -> None:
        """Close every connection; a later command reconnects."""
        with self._lock:
            conns = list(self._conns.values())
        for c in conns:
            with c.lock:
                if c.client is not None:
                    c.client.close()
                    c.client = None


POOL = SshPool()


def fingerprint(key: paramiko.PKey) -> str:
    """A key's fingerprint as OpenSSH prints it: `ssh-ed25519 SHA256:...`."""
    return f"{key.get_name()} {key.fingerprint}"


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Reject an unknown host key with HostKeyUnknown naming the host and file, or (when asked to
    accept) trust it for this process only. Paramiko's RejectPolicy raises a bare SSHException,
    and its AutoAddPolicy writes the key into the known_hosts file it loaded."""

    def __init__(self, remote: SshRemote):
        self.remote = remote

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        r = self.remote
        if not r.accept_unknown_host_keys:
            raise HostKeyUnknown(f"{r.label}: host key not in {r.known_hosts} ({fingerprint(key)}); "
                                 "set accept_unknown_host_keys: true in the hosts file to trust it")
        client.get_host_keys().add(hostname, key.get_name(), key)
        r._conn.accepted = key


class SshRemote:
    """One host reached over SSH as a Remote.

    `key` is a private key file; without one, the SSH agent and the user's default keys
    (~/.ssh/id_*) are tried, as ssh does. `user` defaults to the local user.
    """

    def __init__(self, name: str, address: str, *, port: int = 22, user: str | None = None,
                 key: Path | str | None = None, known_hosts: Path | str | None = None,
                 accept_unknown_host_keys: bool = False, connect_timeout: float = 10.0,
                 kill_after: float = 5.0, pool: SshPool | None = None):
        self.name, self.address, self.port = name, address, port
        self.user = user or getpass.getuser()
        self.key = Path(key).expanduser() if key else None
        self.known_hosts = Path(known_hosts or DEFAULT_KNOWN_HOSTS).expanduser()
        self.accept_unknown_host_keys = accept_unknown_host_keys
        self.connect_timeout = connect_timeout
        self.kill_after = kill_after
        # The login and trust settings are part of the key: a strict remote never reuses a
        # connection that a remote accepting unknown host keys (or using another key) opened.
        self._conn = (pool or POOL).entry((self.user, address, port, str(self.key), str(self.known_hosts),
                                           accept_unknown_host_keys))

    @property
    def label(self) -> str:
        """How messages name this host: `n1 (172.30.5.2:22)`."""
        return f"{self.name} ({self.address}:{self.port})"

    def __repr__(self) -> str:
        return f"SshRemote({self.user}@{self.label})"

    @property
    def accepted_host_key(self) -> str | None:
        """Fingerprint of the host key accepted without being in known_hosts, or None if none was."""
        k = self._conn.accepted
        return fingerprint(k) if k else None

    @property
    def transport(self) -> paramiko.Transport:
        """The live transport to this host, connecting if there is none."""
        return self._client().get_transport()

    # --- connecting ---------------------------------------------------------------
    def _client(self, fresh: bool = False) -> paramiko.SSHClient:
        c = self._conn
        with c.lock:
            t = c.client.get_transport() if c.client else None
            if fresh or t is None or not t.is_active():
                if c.client is not None:
                    c.client.close()
                    c.client = None
                c.client = self._connect()
            return c.client

    def _connect(self) -> paramiko.SSHClient:
        pkey = self._load_key()
        try:
            for attempt in Retrying(stop=stop_after_attempt(HANDSHAKE_ATTEMPTS), reraise=True,
                                    wait=wait_exponential(multiplier=0.5, max=4),
                                    retry=retry_if_exception_type(_Transient)):
                with attempt:
                    return self._connect_once(pkey)
        except _Transient as e:
            raise HostUnreachable(f"{self.label}: SSH handshake failed {HANDSHAKE_ATTEMPTS} times: "
                                  f"{e}") from None
        raise AssertionError("unreachable")

    def _load_key(self) -> paramiko.PKey | None:
        if self.key is None:
            return None
        try:
            return paramiko.PKey.from_path(self.key)
        except FileNotFoundError:
            raise AuthFailed(f"{self.label}: key file {self.key} does not exist") from None
        except paramiko.PasswordRequiredException:
            raise AuthFailed(f"{self.label}: key file {self.key} is encrypted; "
                             "load it into ssh-agent and leave `key` out") from None
        except (paramiko.SSHException, OSError, ValueError) as e:
            raise AuthFailed(f"{self.label}: key file {self.key} cannot be used: {e}") from None

    def _connect_once(self, pkey: paramiko.PKey | None) -> paramiko.SSHClient:
        try:
            sock = socket.create_connection((self.address, self.port), timeout=self.connect_timeout)
        except socket.gaierror as e:
            raise HostUnreachable(f"{self.label}: unreachable: cannot resolve {self.address}: {e.strerror}") from None
        except TimeoutError:
            raise HostUnreachable(f"{self.label}: unreachable: no answer within {self.connect_timeout:g}s") from None
        except OSError as e:
            raise HostUnreachable(f"{self.label}: unreachable: {e.strerror or e}") from None
        client = paramiko.SSHClient()
        # .load, not client.load_host_keys: the latter would make paramiko write known_hosts back.
        if self.known_hosts.exists():
            client.get_host_keys().load(str(self.known_hosts))
        if self._conn.accepted is not None:
            k = self._conn.accepted
            client.get_host_keys().add(self._host_key_name(), k.get_name(), k)
        client.set_missing_host_key_policy(_HostKeyPolicy(self))
        try:
            client.connect(self.address, port=self.port, username=self.user, sock=sock, pkey=pkey,
                           allow_agent=pkey is None, look_for_keys=pkey is None,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, channel_timeout=self.connect_timeout)
            return client
        except BaseException as e:
            client.close()
            sock.close()
            if isinstance(e, paramiko.BadHostKeyException):
                if self._conn.accepted is not None:
                    where = "the one accepted earlier in this run"
                else:
                    where = (f"the one in {self.known_hosts}; if the host was reinstalled, "
                             f"ssh-keygen -f {self.known_hosts} -R '{self._host_key_name()}' forgets it")
                raise HostKeyChanged(f"{self.label}: host key changed: {fingerprint(e.key)} is not "
                                     f"{where}") from None
            if isinstance(e, paramiko.AuthenticationException):
                how = f"key {self.key}" if self.key else "the SSH agent and default keys"
                raise AuthFailed(f"{self.label}: login as {self.user} with {how} refused") from None
            if isinstance(e, (paramiko.SSHException, EOFError, OSError)):
                raise _Transient(f"{type(e).__name__}: {e}") from None
            raise

    def _host_key_name(self) -> str:
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def _channel(self) -> paramiko.Channel:
        """A session channel; one opened on a transport that turns out dead is opened again on a new
        connection (nothing has run yet, so that is safe)."""
        try:
            return self._client().get_transport().open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError):
            return self._client(fresh=True).get_transport().open_session(timeout=self.connect_timeout)

    # --- Remote -------------------------------------------------------------------
    def run(self, cmd: Command, *, timeout: float, check: bool = False, sudo: bool = False,
            stdin: bytes | None = None) -> Result:
        """Run `cmd` on the host under `timeout`; see Remote.run."""
        line = render(node_argv(cmd, timeout, self.kill_after, sudo))
        chan = self._channel()
        start = time.monotonic()
        hard_deadline = start + timeout + self.kill_after + CHANNEL_GRACE_S
        out, err = bytearray(), bytearray()
        writer = None
        try:
            chan.exec_command(line)
            if stdin is None:
                chan.shutdown_write()
            else:
                writer = threading.Thread(target=_feed, args=(chan, stdin), daemon=True)
                writer.start()
            while True:
                while chan.recv_ready():
                    out += chan.recv(1 << 16)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(1 << 16)
                if chan.exit_status_ready() and chan.eof_received and not chan.recv_ready() \
                        and not chan.recv_stderr_ready():
                    break
                if chan.closed and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if time.monotonic() > hard_deadline:
                    raise CommandTimeout(self.name, render(cmd), timeout, out.decode(errors="replace"),
                                         err.decode(errors="replace"))
                select.select([chan], [], [], 0.05)
            # paramiko reports a channel closed by a dying transport, and one whose process died of a
            # signal (an exit-signal, which it ignores), both as exit status -1: the transport tells them apart.
            code = chan.recv_exit_status()
            if code == -1 and _died(chan.get_transport()):
                code = None
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise ConnectionLost(f"{self.label}: connection lost while running `{render(cmd)}`: {e}") from None
        finally:
            chan.close()
            if writer is not None:
                writer.join(timeout=1)
        if code is None:
            raise ConnectionLost(f"{self.label}: connection lost while running `{render(cmd)}`")
        return finish(self.name, cmd, code, bytes(out), bytes(err), timeout=timeout,
                      elapsed=time.monotonic() - start, check=check)

    def _sftp(self) -> paramiko.SFTPClient:
        try:
            return self._client().open_sftp()
        except (paramiko.SSHException, EOFError, OSError):
            return self._client(fresh=True).open_sftp()

    def put(self, local: Path, remote: str, mode: int | None = None) -> None:
        """Copy `local` to `remote` over SFTP (owned by the login user); see Remote.put."""
        local = Path(local)
        bits = stat.S_IMODE(local.stat().st_mode) if mode is None else mode
        with self._sftp() as sftp:
            try:
                sftp.put(str(local), remote)
                sftp.chmod(remote, bits)
            except OSError as e:
                raise TransferFailed(f"{self.label}: put {local} -> {remote}: {e.strerror or e}") from None

    def get(self, remote: str, local: Path) -> None:
        """Copy the regular file `remote` to `local` over SFTP; see Remote.get."""
        with self._sftp() as sftp:
            try:
                if not stat.S_ISREG(sftp.stat(remote).st_mode or 0):
                    raise TransferFailed(f"{self.label}: get {remote}: not a regular file")
                sftp.get(remote, str(local))
            except OSError as e:
                Path(local).unlink(missing_ok=True)
                raise TransferFailed(f"{self.label}: get {remote}: {e.strerror or e}") from None

    def close(self) -> None:
        """Close the pooled connection to this host (shared with every SshRemote on the same
        user, address and port); the next command reconnects."""
        c = self._conn
        with c.lock:
            if c.client is not None:
                c.client.close()
                c.client = None


def _feed(chan: paramiko.Channel, data: bytes) -> None:
    # A thread, so a command that writes much before reading its input cannot deadlock with us.
    try:
        chan.sendall(data)
        chan.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass  # the command exited without reading everything



def _died(t: paramiko.Transport) -> bool:
    # The transport thread records why it ended before it closes the channels, and only then
    # clears `active`; a failed channel open also leaves a ChannelException there, harmlessly.
    e = t.saved_exception
    return not t.is_active() or (e is not None and not isinstance(e, paramiko.ChannelException))


def to_remote(host: Host, hosts: HostsFile, *, pool: SshPool | None = None,
              connect_timeout: float = 10.0) -> SshRemote:
    """The SSH transport to `host`, with the file's known_hosts and host-key policy; it connects on
    first use, so building it touches no network."""
    return SshRemote(host.name, host.address, port=host.port, user=host.user, key=host.key,
                     known_hosts=hosts.known_hosts, accept_unknown_host_keys=hosts.accept_unknown_host_keys,
                     connect_timeout=connect_timeout, pool=pool)
