"""One node's transport, as kafkatest's Service sits on `node.account`: run a command, put a file, get a file.

`Remote` is the protocol; `DockerRemote` implements it over `docker exec` and
`SshRemote` over SSH (paramiko). Kafka's service logic is meant to sit on it and
never know which one it has.

Every command runs under coreutils `timeout` on the node itself, so a command that outlives
its deadline is killed there (its whole process group: `timeout` makes one and signals it),
even if the harness or its connection is gone by then.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

Command = list[str] | str
"""A list is an argv, run as is; a str is a shell command line, run with `sh -c`."""

# `timeout` exits 124 when it stopped the command with SIGTERM; when SIGKILL was needed the group,
# `timeout` included, dies of it: 137 from a shell, -1 over SSH (an exit-signal, not an exit-status).
TIMEOUT_CODES = (124, 137, -1)


@dataclass(frozen=True)
class Result:
    """What a finished command did: its exit code, its output decoded as UTF-8 (undecodable bytes
    replaced), and how long it took. `cmd` is the command as the caller gave it, rendered for a shell."""
    node: str
    cmd: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0


class RemoteError(RuntimeError):
    """Something a node's transport could not do; the message is one line naming the node."""


class CommandFailed(RemoteError):
    """A command run with check=True exited non-zero; `result` has its exit code, stdout and stderr."""

    def __init__(self, result: Result):
        self.result = result
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
        super().__init__(f"{result.node}: `{result.cmd}` exited {result.exit_code}"
                         + (f": {detail[-1][:300]}" if detail else ""))


class CommandTimeout(RemoteError):
    """A command outlived its timeout and was killed on the node; the output it wrote until then is kept."""

    def __init__(self, node: str, cmd: str, timeout: float, stdout: str = "", stderr: str = ""):
        self.node, self.cmd, self.timeout, self.stdout, self.stderr = node, cmd, timeout, stdout, stderr
        super().__init__(f"{node}: `{cmd}` timed out after {timeout:g}s and was killed")


class TransferFailed(RemoteError):
    """A file could not be put on or got from a node (missing directory or file, no permission)."""


class ConnectionLost(RemoteError):
    """The connection dropped while a command ran: whether the command ran is unknown, so it is not
    retried. The next call reconnects."""


class ConnectError(RemoteError):
    """The node cannot be reached or logged into. The command line maps every subclass to exit 4."""


class HostUnreachable(ConnectError):
    """No connection: refused, no route, name not resolved, connect timeout, or the handshake kept
    failing; for Docker, the container is gone."""


class AuthFailed(ConnectError):
    """The node refused the login (wrong user or key), or the key file cannot be used."""


class HostKeyError(ConnectError):
    """The node's host key could not be trusted."""


class HostKeyUnknown(HostKeyError):
    """The node's host key is not in known_hosts and accepting unknown keys was not asked for."""


class HostKeyChanged(HostKeyError):
    """The node's host key differs from the one known_hosts (or an earlier connection) has for it."""


@runtime_checkable
class Remote(Protocol):
    """One node: run commands on it and move files to and from it.

    `name` is the node's name in the test (n1); `address` is where the transport reaches it.
    Implementations are safe to use from several threads at once.
    """
    name: str
    address: str

    def run(self, cmd: Command, *, timeout: float, check: bool = False, sudo: bool = False,
            stdin: bytes | None = None) -> Result:
        """Run `cmd` on the node and wait for it. `stdin` is fed to it and then closed (else it reads
        EOF). With sudo, runs it as root (`sudo -n`: never prompts). Raises CommandTimeout when it
        ran longer than `timeout` seconds (it is killed on the node), CommandFailed when check is
        set and it exited non-zero, a ConnectError when the node cannot be reached."""
        ...

    def put(self, local: Path, remote: str, mode: int | None = None) -> None:
        """Copy the local file to the path `remote` on the node (its directory must exist), with
        permission bits `mode`, or the local file's when None. Raises TransferFailed."""
        ...

    def get(self, remote: str, local: Path) -> None:
        """Copy the regular file `remote` on the node to `local`. Raises TransferFailed."""
        ...

    def close(self) -> None:
        """Release the connection; a later call reconnects."""
        ...


def render(cmd: Command) -> str:
    """`cmd` as one shell command line (for messages, and for the SSH exec request)."""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


def node_argv(cmd: Command, timeout: float, kill_after: float, sudo: bool) -> list[str]:
    """The argv that runs `cmd` on a node under `timeout` (SIGTERM at `timeout`, SIGKILL `kill_after`
    seconds later), as root through `sudo -n` when asked."""
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, not {timeout}")
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    if not argv:
        raise ValueError("empty command")
    argv = ["timeout", "-k", f"{kill_after:g}", f"{timeout:.3f}", *argv]
    return ["sudo", "-n", "--", *argv] if sudo else argv


def finish(node: str, cmd: Command, code: int, out: bytes, err: bytes, *, timeout: float,
           elapsed: float, check: bool) -> Result:
    """The Result of a command that ran under node_argv, or the exception it calls for."""
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    # A command may exit 124 by itself; only one that also used up its time was stopped by `timeout`.
    if code in TIMEOUT_CODES and elapsed >= timeout:
        raise CommandTimeout(node, render(cmd), timeout, stdout, stderr)
    result = Result(node, render(cmd), code, stdout, stderr, elapsed)
    if check and code != 0:
        raise CommandFailed(result)
    return result
