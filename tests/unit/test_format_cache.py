"""kafka-ctl's format with a cache of formatted storage (KCHAOS_FORMAT_CACHE), run here on this host with a
stand-in for the storage tool's JVM that writes what the tool writes (meta.properties in every log directory,
bootstrap.checkpoint in the first) and counts its runs."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

KAFKA_CTL = Path(__file__).resolve().parents[2] / "clusters" / "node" / "kafka-ctl"
# The storage tool as kafka-ctl calls it: ... CLASS format -t ID -c CONF --ignore-formatted [--feature X=N ...]
FAKE_JAVA = r"""#!/bin/bash
echo run >> "$FAKE_RUNS"
while [ $# -gt 0 ]; do
  case $1 in -t) id=$2; shift ;; -c) conf=$2; shift ;; --feature) features="$features $2"; shift ;; esac; shift
done
dirs=$(sed -n 's/^log\.dirs=//p' "$conf" | tr , ' ')
first=1
for d in $dirs; do
  mkdir -p "$d"
  printf 'node.id=1\ndirectory.id=%s\nversion=1\ncluster.id=%s\n' "$RANDOM$RANDOM" "$id" > "$d/meta.properties"
  [ $first = 1 ] && printf 'checkpoint %s %s' "$RANDOM" "$features" > "$d/bootstrap.checkpoint"
  first=0
done
"""


@pytest.fixture
def node(tmp_path: Path) -> dict[str, str]:
    java = tmp_path / "java"
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    conf = tmp_path / "conf"
    conf.mkdir()
    data = tmp_path / "data"
    (conf / "server.properties").write_text(
        f"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@10.0.0.1:9093\n"
        f"log.dirs={data}/a,{data}/b\n")
    return {**os.environ, "JAVA": str(java), "KCHAOS_CONF": str(conf), "KCHAOS_DATA": str(tmp_path / "kafka"),
            "KCHAOS_RUN": str(tmp_path / "run"), "KCHAOS_LIBS": str(tmp_path / "libs"),
            "FAKE_RUNS": str(tmp_path / "runs"),
            "KCHAOS_FORMAT_CACHE": str(tmp_path / "cache"), "DATA": str(data)}


def _format(env: dict[str, str], cluster_id: str, *features: str) -> str:
    r = subprocess.run(["bash", str(KAFKA_CTL), "format", cluster_id, *(a for f in features for a in ("--feature", f))],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _runs(env: dict[str, str]) -> int:
    path = Path(env["FAKE_RUNS"])
    return len(path.read_text().splitlines()) if path.exists() else 0


def _wipe(env: dict[str, str]) -> None:
    subprocess.run(["rm", "-rf", env["DATA"]], check=True)


def test_a_second_format_copies_the_first_with_its_own_cluster_id(node: dict[str, str]) -> None:
    data = Path(node["DATA"])
    _format(node, "first-cluster-id-0000A")
    assert _runs(node) == 1
    checkpoint = (data / "a" / "bootstrap.checkpoint").read_bytes()
    directory_ids = [(data / d / "meta.properties").read_text().splitlines()[1] for d in "ab"]
    _wipe(node)
    out = _format(node, "second-cluster-id-000B")
    assert _runs(node) == 1, "the storage tool ran again"
    assert "formatted from" in out
    for d in "ab":
        lines = (data / d / "meta.properties").read_text().splitlines()
        assert "cluster.id=second-cluster-id-000B" in lines
        assert not any("first-cluster-id" in line for line in lines)
    assert [(data / d / "meta.properties").read_text().splitlines()[1] for d in "ab"] == directory_ids
    assert (data / "a" / "bootstrap.checkpoint").read_bytes() == checkpoint


def test_other_features_or_another_node_format_again(node: dict[str, str]) -> None:
    _format(node, "cluster-id-00000000000A")
    _wipe(node)
    _format(node, "cluster-id-00000000000A", "metadata.version=14")
    assert _runs(node) == 2
    conf = Path(node["KCHAOS_CONF"]) / "server.properties"
    conf.write_text(conf.read_text().replace("node.id=1", "node.id=2"))
    _wipe(node)
    _format(node, "cluster-id-00000000000A", "metadata.version=14")
    assert _runs(node) == 3
    # The controllers' addresses are not part of what is formatted: a run on another subnet copies.
    conf.write_text(conf.read_text().replace("10.0.0.1", "10.9.9.1"))
    _wipe(node)
    _format(node, "cluster-id-00000000000A", "metadata.version=14")
    assert _runs(node) == 3
    assert len(list(Path(node["KCHAOS_FORMAT_CACHE"]).glob("*.tar"))) == 3


def test_formatted_storage_is_left_alone(node: dict[str, str]) -> None:
    _format(node, "cluster-id-00000000000A")
    meta = Path(node["DATA"]) / "a" / "meta.properties"
    before = meta.read_text()
    assert "already formatted" in _format(node, "cluster-id-00000000000B")
    assert meta.read_text() == before
    assert _runs(node) == 1


def test_without_a_cache_the_tool_runs_every_time(node: dict[str, str]) -> None:
    env = {k: v for k, v in node.items() if k != "KCHAOS_FORMAT_CACHE"}
    _format(env, "cluster-id-00000000000A")
    _wipe(env)
    _format(env, "cluster-id-00000000000A")
    assert _runs(env) == 2


def _ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(KAFKA_CTL), *args], env=env, capture_output=True, text=True, timeout=30)


def _stored(env: dict[str, str]) -> dict[str, str]:
    """Each log directory's files below it (relative paths), with meta.properties' text."""
    data = Path(env["DATA"])
    return {str(p.relative_to(data)): (p.read_text() if p.name == "meta.properties" else "")
            for p in sorted(data.rglob("*")) if p.is_file()}


def _with_partitions(env: dict[str, str]) -> None:
    _format(env, "abcdefghijklmnopqrstuv")
    for d in ("a", "b"):
        for sub in ("kchaos-0", "__cluster_metadata-0"):
            (Path(env["DATA"]) / d / sub).mkdir(parents=True, exist_ok=True)
            (Path(env["DATA"]) / d / sub / "00000000000000000000.log").write_text("records")
        (Path(env["DATA"]) / d / "recovery-point-offset-checkpoint").write_text("0\n1\nkchaos 0 5\n")


def test_a_wipe_of_the_data_keeps_the_metadata_log_and_the_directory_ids(node):
    _with_partitions(node)
    before = _stored(node)
    r = _ctl(node, "wipe", "abcdefghijklmnopqrstuv", "data")
    assert r.returncode == 0, r.stdout + r.stderr
    after = _stored(node)
    assert after == {k: v for k, v in before.items() if "kchaos-0" not in k and "checkpoint" not in k
                     or k.endswith("bootstrap.checkpoint")}
    assert any("__cluster_metadata-0" in k for k in after)


def test_a_wipe_of_everything_formats_anew_with_the_cluster_id_and_a_new_directory_id(node):
    _with_partitions(node)
    before = _stored(node)
    runs = _runs(node)
    r = _ctl(node, "wipe", "abcdefghijklmnopqrstuv", "all", "--feature", "kraft.version=1")
    assert r.returncode == 0, r.stdout + r.stderr
    after = _stored(node)
    assert sorted(after) == ["a/bootstrap.checkpoint", "a/meta.properties", "b/meta.properties"]
    assert _runs(node) == runs + 1  # the storage tool itself, never the format cache's copy of the old disk
    assert "cluster.id=abcdefghijklmnopqrstuv" in after["a/meta.properties"]
    assert after["a/meta.properties"] != before["a/meta.properties"]  # another directory.id
    assert "kraft.version=1" in (Path(node["DATA"]) / "a" / "bootstrap.checkpoint").read_text()


def test_a_wipe_without_its_mode_says_how_to_call_it(node):
    _with_partitions(node)
    r = _ctl(node, "wipe", "abcdefghijklmnopqrstuv")
    assert r.returncode == 2 and "usage: kafka-ctl wipe CLUSTER_ID all|data" in r.stderr
