"""The SSH hosts' prerequisite check, run here in a real shell: a host of another machine, an older
glibc or without lazyfs's libraries is named missing before anything is created on it."""
from __future__ import annotations

import platform
import subprocess

from kchaos.clusters import lazyfs
from kchaos.clusters.ssh import _PREREQUISITES, prerequisite_args
from kchaos.core.hosts import Host


def missing(*args: str) -> list[str]:
    out = subprocess.run(["sh", "-c", _PREREQUISITES, "sh", *args], capture_output=True, text=True, check=True)
    return out.stdout.rpartition("missing:")[2].split()


def test_lazyfs_needs_this_machine_its_glibc_and_libfuse3():
    needs = lazyfs.needs(lazyfs.build())
    assert needs.machine == platform.machine()
    assert needs.glibc >= (2, 2) and needs.libraries == ("libfuse3.so.3",)
    assert prerequisite_args("lazyfs", Host("n1", "10.0.0.1", "root"), lazyfs.build()) == ["lazyfs", "managed",
                                                                                   *needs.args()]
    assert prerequisite_args("plain", Host("n1", "10.0.0.1", "root"), lazyfs.build()) == ["plain", "managed"]


def test_a_host_that_cannot_run_this_lazyfs_is_named_missing():
    own = lazyfs.needs(lazyfs.build())
    here = [m for m in missing("lazyfs", "managed", *own.args())
            if m.startswith(("lazyfs-for-", "glibc-", "lib"))]
    assert here == []  # this machine built it, so it runs it
    other = "aarch64" if own.machine != "aarch64" else "x86_64"
    got = missing("lazyfs", "managed", other, "9.99", "libfuse3.so.3", "libkchaos-absent.so.7")
    assert f"lazyfs-for-{other}(host-is-{own.machine})" in got
    assert any(m.startswith("glibc-9.99-or-newer(host-has-2.") for m in got)
    assert "libkchaos-absent.so.7" in got and "libfuse3.so.3" not in got
    assert not any(m.startswith(("lazyfs-for-", "glibc-")) for m in missing("plain", "managed"))
