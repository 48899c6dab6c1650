"""The Kafka lines kchaos runs (core/kafka_versions.py): the option check, `kchaos versions`, and the configuration and
tool command lines generated for each line."""
import os
import subprocess
from pathlib import Path

import pytest

from kchaos.clusters.kafka_node import NODE_DIR, SCRIPTS
from kchaos.clusters.kraft import NodeSpec, server_properties
from kchaos.core.config import ClusterConfig, ConfigError, validate
from kchaos.core.jvm import SHORT_LIVED
from kchaos.core.kafka_versions import (
    LINES,
    NEW_DUMP_CLASS,
    OLD_DUMP_CLASS,
    UnsupportedVersion,
    dump_class,
    line_of,
    node_env,
    perf_command,
    resolve_version,
    tools_record,
)
from kchaos.evidence import kafka_logs
from kchaos.harness.cli.main import build_parser, main
from kchaos.harness.options import config_from_args
from kchaos.nemesis import check_spec

LATEST = {"3.7": "3.7.2", "3.8": "3.8.1", "3.9": "3.9.2", "4.0": "4.0.2", "4.1": "4.1.2", "4.2": "4.2.2",
          "4.3": "4.3.1", "4.4": "4.4.0"}
# Broker configs Kafka 4.0 removed (ZooKeeper, message format, inter-broker protocol): none may be written.
REMOVED_IN_4 = ("zookeeper.", "log.message.format.version", "message.format.version", "inter.broker.protocol.version",
                "control.plane.listener.name", "broker.id.generation.enable", "log.message.downconversion.enable")


def cfg(*argv):
    return config_from_args(build_parser().parse_args(["run", "--seed", "1", *argv]))


def test_every_line_from_3_7_to_4_4_with_its_latest_patch():
    assert {x.line: x.latest for x in LINES} == LATEST


@pytest.mark.parametrize("given, exact", [*LATEST.items(), ("4.1.0", "4.1.0"), ("3.7.2", "3.7.2"), ("4.0.0", "4.0.0")])
def test_a_line_runs_its_latest_patch_and_an_exact_release_itself(given, exact):
    assert resolve_version(given) == exact
    c = validate(cfg("--kafka-version", given), check_spec)
    assert c.cluster.kafka_version == exact


@pytest.mark.parametrize("bad", ["3.6", "3.6.2", "4.5", "4.4.1", "5.0.0", "latest", "4", "4.2.x"])
def test_a_version_kchaos_cannot_run_is_refused_in_one_line(bad):
    with pytest.raises(UnsupportedVersion):
        resolve_version(bad)
    with pytest.raises(ConfigError, match="--kafka-version") as e:
        validate(cfg("--kafka-version", bad), check_spec)
    assert "\n" not in str(e.value) and "4.4 (4.4.0)" in str(e.value)


def test_the_cli_exits_3_before_creating_anything(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["run", "--kafka-version", "4.5", "--store", str(store)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kchaos cannot run it" in err[0]
    assert not store.exists()


def test_a_user_distribution_brings_its_own_version():
    c = ClusterConfig(kafka_version="whatever", kafka_dist="/opt/kafka")
    validate(cfg().with_(cluster=c), check_spec)


def test_kchaos_versions_lists_every_line_and_what_is_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    for v in ("4.1.0", "4.4.0", "3.9.2"):
        (tmp_path / f"kafka-{v}").mkdir()
        (tmp_path / f"kafka-{v}" / ".complete").touch()
    (tmp_path / "kafka-4.2.2").mkdir()  # an interrupted fetch is not cached
    assert main(["versions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[:2] for ln in lines] == [[k, v] for k, v in LATEST.items()]
    by = {ln.split()[0]: ln for ln in lines}
    assert "not cached" in by["3.7"] and "[default]" in by["3.7"]
    assert by["4.4"].split()[2] == "cached" and by["3.9"].split()[2] == "cached"
    assert "not cached" in by["4.1"] and "also cached: 4.1.0" in by["4.1"]
    assert "not cached" in by["4.2"]


# --- what each line gets ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", list(LATEST))
def test_server_properties_hold_no_key_the_line_dropped(line):
    spec = NodeSpec("n1", 1, "10.0.0.11", ("broker", "controller"))
    props = server_properties(spec, [spec], ClusterConfig(kafka_version=LATEST[line]))
    keys = [ln.split("=", 1)[0] for ln in props.splitlines()]
    assert "process.roles" in keys and "controller.quorum.voters" in keys
    if line_of(LATEST[line]).major >= 4:
        assert not [k for k in keys if k.startswith(REMOVED_IN_4)]


@pytest.mark.parametrize("line, log4j2, dump, bootstrap", [
    ("3.7", False, OLD_DUMP_CLASS, False), ("3.8", False, OLD_DUMP_CLASS, False),
    ("3.9", False, OLD_DUMP_CLASS, False), ("4.0", False, OLD_DUMP_CLASS, False),
    ("4.1", True, OLD_DUMP_CLASS, False), ("4.2", True, OLD_DUMP_CLASS, True),
    ("4.3", True, NEW_DUMP_CLASS, True), ("4.4", True, NEW_DUMP_CLASS, True),
])
def test_each_line_s_logging_and_tools(line, log4j2, dump, bootstrap):
    v = LATEST[line]
    assert node_env(v) == {"KCHAOS_STORAGE_TOOL": "kafka.tools.StorageTool", "KCHAOS_LOG4J2": "1" if log4j2 else "0"}
    assert dump_class(v) == dump
    cmd = perf_command(v, "t", 10, "10.0.0.11:9092", "all")
    assert cmd[0] == "org.apache.kafka.tools.ProducerPerformance"
    if bootstrap:
        assert (cmd[cmd.index("--bootstrap-server") + 1] == "10.0.0.11:9092"
                and "bootstrap.servers=" not in " ".join(cmd))
    else:
        assert "--bootstrap-server" not in cmd and "bootstrap.servers=10.0.0.11:9092" in cmd
    rec = tools_record(v)
    assert (rec["line"], rec["tools_version"], rec["dump_class"], rec["java"]) == (line, v, dump, "17")


def test_dump_log_segments_runs_the_class_of_the_jars_it_is_given(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(kafka_logs, "_java", lambda: "java")
    monkeypatch.setattr(kafka_logs.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    for v in ("3.7.2", "4.2.2", "4.3.1", "4.4.0"):
        libs = tmp_path / v
        libs.mkdir()
        (libs / f"kafka_2.13-{v}.jar").touch()
        (libs / f"kafka-tools-{v}.jar").touch()
        kafka_logs.dump(libs, ["__cluster_metadata-0/0.log"], tmp_path, metadata=True)
        cmd = seen[-1]
        assert cmd[cmd.index("-cp") + 2] == dump_class(v) and cmd[-1] == "--cluster-metadata-decoder"
        assert set(SHORT_LIVED) <= set(cmd[:cmd.index("-cp")])  # a tool run for seconds: C1, the serial collector
    assert kafka_logs.dump_class_of(tmp_path / "nothing") == OLD_DUMP_CLASS


def _kafka_ctl(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    """kafka-ctl run with a stand-in java that prints its arguments, one per line."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "kafka-ctl").write_bytes((NODE_DIR / "kafka-ctl").read_bytes())
    java = tmp_path / "java"
    java.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    for p in (bin_ / "kafka-ctl", java):
        p.chmod(0o755)
    node_env_ = {"KCHAOS_CONF": tmp_path / "conf", "KCHAOS_DATA": tmp_path / "data", "KCHAOS_RUN": tmp_path / "run",
                 "KCHAOS_LIBS": tmp_path / "libs", "JAVA": java, **env}
    (bin_ / "node.env").write_text("".join(f"export {k}={v}\n" for k, v in node_env_.items()))
    return subprocess.run([str(bin_ / "kafka-ctl"), *args], capture_output=True, text=True, check=True,
                          env={"PATH": os.environ["PATH"]}).stdout


@pytest.mark.parametrize("line", ["3.7", "4.0", "4.1", "4.4"])
def test_kafka_ctl_gives_each_line_its_logging_and_storage_tool(tmp_path, line):
    args = _kafka_ctl(tmp_path, node_env(LATEST[line]), "format", "CID").splitlines()
    assert args[args.index("kafka.tools.StorageTool"):][:3] == ["kafka.tools.StorageTool", "format", "-t"]
    assert "--ignore-formatted" in args
    assert f"-Dlog4j.configuration=file:{tmp_path}/bin/log4j-tools.properties" in args
    log4j2 = [a for a in args if a.startswith("-Dlog4j2.configurationFile=")]
    assert log4j2 == ([f"-Dlog4j2.configurationFile={tmp_path}/bin/log4j2-tools.properties"]
                      if line_of(LATEST[line]).log4j2 else [])
    tool = _kafka_ctl(tmp_path, node_env(LATEST[line]), "tool", dump_class(LATEST[line]), "--help").splitlines()
    assert dump_class(LATEST[line]) in tool and ("-Dlog4j2.configurationFile" in " ".join(tool)) == bool(log4j2)


def test_the_node_scripts_carry_both_logging_configurations():
    for name in ("log4j.properties", "log4j-tools.properties", "log4j2.properties", "log4j2-tools.properties"):
        assert name in SCRIPTS and (NODE_DIR / name).is_file()
        assert name in (NODE_DIR / "Dockerfile").read_text()
    assert "${sys:kafka.logs.dir}" in (NODE_DIR / "log4j2.properties").read_text()


def test_maven_fetches_the_tools_the_line_names(tmp_path, monkeypatch):
    from dataclasses import replace

    from kchaos.clusters import distribution
    from kchaos.core import kafka_versions

    seen = []

    def mvn(cmd, **kw):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "no network in a unit test")

    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    monkeypatch.setattr(distribution.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(distribution.subprocess, "run", mvn)
    with pytest.raises(distribution.DistributionError):
        distribution.resolve("4.3.1")
    assert "-Dkafka.version=4.3.1" in seen[-1] and "-Dtools.version=4.3.1" in seen[-1]
    lines = tuple(replace(x, tools_version="4.2.2") if x.line == "4.3" else x for x in LINES)
    monkeypatch.setattr(kafka_versions, "LINES", lines)
    with pytest.raises(distribution.DistributionError):
        distribution.resolve("4.3.1")
    assert "-Dtools.version=4.2.2" in seen[-1]
    assert tools_record("4.3.1")["tools_version"] == "4.2.2"


def test_kafka_ctl_formats_with_the_features_it_is_given(tmp_path):
    args = _kafka_ctl(tmp_path, node_env(LATEST["4.0"]), "format", "CID", "--feature",
                      "eligible.leader.replicas.version=1").splitlines()
    assert args[-3:] == ["--ignore-formatted", "--feature", "eligible.leader.replicas.version=1"]


@pytest.mark.parametrize("argv, needle", [
    (["--kafka-version", "4.0", "--kafka-feature", "elr"],
     "--kafka-feature must be NAME=LEVEL (like eligible.leader.replicas.version=1), got 'elr'"),
    (["--kafka-feature", "eligible.leader.replicas.version=1"],
     "--kafka-feature needs Kafka 3.9 or later (its storage tool's --feature), not --kafka-version 3.7.2"),
])
def test_a_bad_kafka_feature_is_a_one_line_error_exiting_3(argv, needle, refused_run):
    refused_run(argv, needle)


def test_kafka_features_go_in_test_json():
    def cluster(*argv):
        return config_from_args(build_parser().parse_args(["run", "--seed", "1", *argv])).to_dict()["cluster"]
    assert cluster("--kafka-version", "4.0")["kafka_features"] == []
    c = cluster("--kafka-version", "4.0", "--kafka-feature", "eligible.leader.replicas.version=1")
    assert c["kafka_features"] == ["eligible.leader.replicas.version=1"]
    assert validate_cluster_features(c)


def validate_cluster_features(c):
    """What a run replays from test.json: the same features, still valid."""
    from kchaos.core.config import TestConfig
    cfg = TestConfig.from_dict({"seed": 1, "cluster": c})
    return validate(cfg).cluster.kafka_features == ("eligible.leader.replicas.version=1",)


def test_two_processes_fetching_one_release_take_turns_and_maven_runs_once(tmp_path, monkeypatch):
    """The second fetcher waits on the cache lock while the first runs Maven, then finds the jars made."""
    import threading

    from kchaos.clusters import distribution

    first_in_maven, let_maven_finish = threading.Event(), threading.Event()
    runs = []

    def mvn(cmd, **kw):
        runs.append(cmd)
        first_in_maven.set()
        assert let_maven_finish.wait(60)
        out = Path(next(a for a in cmd if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "kafka_2.13-4.3.1.jar").write_bytes(b"jar")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    monkeypatch.setattr(distribution.shutil, "which", lambda name: "/usr/bin/mvn")
    monkeypatch.setattr(distribution.subprocess, "run", mvn)
    got = []
    first = threading.Thread(target=lambda: got.append(distribution.resolve("4.3.1")))
    first.start()
    assert first_in_maven.wait(60)
    second = threading.Thread(target=lambda: got.append(distribution.resolve("4.3.1")))
    second.start()
    second.join(0.5)
    assert second.is_alive() and len(got) == 0  # waiting on the lock, not fetching beside the first
    let_maven_finish.set()
    first.join(60)
    second.join(60)
    assert len(runs) == 1 and len(got) == 2 and got[0] == got[1]
    assert (got[0].libs / "kafka_2.13-4.3.1.jar").read_bytes() == b"jar"
