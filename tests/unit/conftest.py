"""Fixtures for the lazyfs tests: the binary, and lazyfs mounts that always die in teardown.

They need /dev/fuse and root, and skip otherwise. A missing compiler or libfuse3-dev is a
failure (LazyfsBuildError says to run `make setup`), not a skip.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusters.lazyfs import build
from lazyfs_mount import Mount

@pytest.fixture(scope="session")
def binary() -> Path:
    if not os.path.exists("/dev/fuse"):
        pytest.skip("lazyfs tests need /dev/fuse")
    if os.geteuid() != 0:
        pytest.skip("lazyfs tests mount FUSE filesystems: run them as root")
    return build()


@pytest.fixture
def mount(binary, tmp_path):
    """mount(*args) starts lazyfs with extra args; every daemon dies in teardown."""
    made: list[Mount] = []

    def make(*args: str) -> Mount:
        m = Mount(binary, tmp_path / f"fs{len(made)}", *args)
        made.append(m)
        m.start()
        return m

    try:
        yield make
    finally:
        for m in made:
            m.kill()


@pytest.fixture
def fs(mount) -> Mount:
    return mount()




@pytest.fixture(scope="module")
def shared_fs(binary, tmp_path_factory):
    m = Mount(binary, tmp_path_factory.mktemp("lazyfs-property"))
    try:
        m.start()
        yield m
    finally:
        m.kill()
