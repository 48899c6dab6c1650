"""`make setup` as CI machines run it: as a user with passwordless sudo, not root. The host part goes through
sudo, and the user comes out able to reach the Docker Engine and to run mmdebstrap as root, which the node
image's base needs. Tried with a user made for the test, removed after it."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.beside

ROOT = Path(__file__).resolve().parents[2]
USER = "kchaos-setup-test"
SUDOERS = Path("/etc/sudoers.d") / USER


def as_user(*cmd: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", USER, "--", *cmd], cwd="/tmp", capture_output=True, text=True,
                          timeout=timeout, env={"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/tmp"})


@pytest.fixture
def user() -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("sudo") is None:
        pytest.skip("needs root to make a user, and sudo (make setup installs it)")
    subprocess.run(["userdel", "-r", USER], capture_output=True)
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
    SUDOERS.write_text(f"{USER} ALL=(ALL) NOPASSWD:ALL\n")
    SUDOERS.chmod(0o440)
    try:
        yield USER
    finally:
        SUDOERS.unlink(missing_ok=True)
        subprocess.run(["setfacl", "-x", f"u:{USER}", "/var/run/docker.sock"], capture_output=True)
        subprocess.run(["userdel", "-r", USER], capture_output=True)


@pytest.fixture
def script() -> Iterator[str]:
    """The set-up script where the user can read it, whoever may read the checkout."""
    where = Path(tempfile.mkdtemp(prefix="kchaos-setup-"))
    try:
        where.chmod(0o755)
        copy = where / "setup-host.sh"
        shutil.copy(ROOT / "clusters" / "setup-host.sh", copy)
        copy.chmod(0o755)
        yield str(copy)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_a_user_with_sudo_sets_the_host_up_and_reaches_docker_and_mmdebstrap(user, script):
    assert as_user("docker", "info").returncode != 0  # a new user cannot reach the Engine
    proc = as_user("bash", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{user} may use the Docker Engine" in proc.stderr
    assert as_user("docker", "info", "--format", "{{.ServerVersion}}").returncode == 0
    assert "docker" in subprocess.run(["id", "-nG", user], capture_output=True, text=True).stdout.split()
    # mmdebstrap, for the node image's base, runs through `sudo -n` for this user (clusters.image._as_root)
    mmdebstrap = as_user("sudo", "-n", "mmdebstrap", "--version")
    assert mmdebstrap.returncode == 0 and "mmdebstrap" in mmdebstrap.stdout, mmdebstrap.stderr
    # a second run finds everything there: idempotent, and still exit 0
    assert as_user("bash", script).returncode == 0


def test_a_user_without_sudo_is_told_what_to_do_in_a_few_lines(user, script):
    SUDOERS.unlink()
    proc = as_user("bash", script)
    assert proc.returncode == 4 and "passwordless sudo" in proc.stderr and len(proc.stderr.splitlines()) <= 4
