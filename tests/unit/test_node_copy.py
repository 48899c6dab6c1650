"""Copying Kafka's files off a node with tar, while Kafka may still be writing them: GNU tar on this machine,
through a transport that runs each command here."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kchaos.clusters.kafka_node import KafkaNode, NodeError, changed_while_read
from kchaos.clusters.kraft import NodeSpec
from kchaos.clusters.remote import Result


class Here:
    """A node that is this machine. `tar_options` go before a `tar`'s own: the test's way to make tar meet a
    file that changes while it reads it, at a point tar itself chooses (a checkpoint), not at a time."""

    name, address = "n1", "127.0.0.1"

    def __init__(self, tar_options: list[str] | None = None):
        self.tar_options = tar_options or []

    def run(self, cmd, *, timeout, check=False, sudo=False, stdin=None):
        argv = list(cmd)
        if argv[0] == "tar":
            argv = ["tar", *self.tar_options, *argv[1:]]
        start = time.monotonic()
        p = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)
        return Result(self.name, shlex.join(argv), p.returncode, p.stdout.decode(), p.stderr.decode(),
                      time.monotonic() - start)

    def put(self, local, remote, mode=None):
        shutil.copy(local, remote)

    def get(self, remote, local):
        shutil.copy(remote, local)

    def close(self):
        pass


def node(remote: Here) -> KafkaNode:
    return KafkaNode(NodeSpec("n1", 1, "127.0.0.1", ("broker", "controller")), remote)


def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(bytes(range(256)) * 400)  # ten of tar's 10 KiB records
    (d / "quorum-state").write_text("{}")
    return d.parent


def test_a_log_appended_while_tar_reads_it_is_copied_as_tar_read_it(tmp_path):
    """The metadata log of a running Kafka grows every half second; a copy that meets the growth keeps the
    node's evidence, each file as tar read it, rather than losing all of it."""
    src = data_dir(tmp_path)
    log = src / "__cluster_metadata-0" / "00000000000000000000.log"
    before = log.read_bytes()
    grow = f"exec=sh -c 'printf more >> {shlex.quote(str(log))}'"
    here = Here(["--checkpoint=2", f"--checkpoint-action={grow}"])
    size = node(here).copy_out(str(src), ["__cluster_metadata-0"], tmp_path / "out")
    copied = tmp_path / "out" / "__cluster_metadata-0"
    assert size > 0 and (copied / "quorum-state").read_text() == "{}"
    assert copied.joinpath(log.name).read_bytes() == before  # what tar read: the log before it grew
    assert log.read_bytes().startswith(before) and len(log.read_bytes()) > len(before)


def test_tar_failing_otherwise_is_a_node_error_naming_it(tmp_path):
    src = data_dir(tmp_path)
    with pytest.raises(NodeError, match=r"n1: tar of .* failed \(2\).*missing"):
        node(Here()).copy_out(str(src), ["__cluster_metadata-0", "missing"], tmp_path / "out")


@pytest.mark.parametrize(("code", "stderr", "changed"), [
    (0, "", []),
    (1, "tar: a/0.log: file changed as we read it\n", ["a/0.log"]),
    (1, "tar: a/0.log: file changed as we read it\ntar: b/1.log: file changed as we read it\n",
     ["a/0.log", "b/1.log"]),
    (1, "tar: a/0.log: file changed as we read it\ntar: b/1.log: File shrank by 12 bytes; padding with zeros\n",
     None),
    (2, "tar: a/0.log: file changed as we read it\n", None),
    (1, "", None),
])
def test_only_files_changed_while_read_are_a_copy_to_keep(code, stderr, changed):
    assert changed_while_read(Result("n1", "tar", code, "", stderr, 0.1)) == changed
