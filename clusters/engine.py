"""The Docker Engine connection, with a clear error when no engine answers."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

LABEL = "io.kchaos"


class EngineError(RuntimeError):
    """No usable Docker Engine; the message says how to get one."""


def docker_client() -> docker.DockerClient:
    """A client for the local Docker Engine (API version negotiated), verified with a ping."""
    import docker  # here: the SDK takes a fifth of a second to import, which a command without Docker should not pay
    try:
        client = docker.from_env(version="auto", timeout=300)
        client.ping()
    except (docker.errors.DockerException, OSError) as e:
        raise EngineError(f"no Docker Engine answers ({type(e).__name__}); "
                          "`make setup` installs Debian's docker.io and starts dockerd") from None
    return client
