"""`--client java` without a cluster: its option errors, what test.json records and a replay reads back, and the
Java client compiled with the real javac and spoken to over its pipe (skipped only where there is no JDK)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kchaos.core.config import JAVA_CLIENTS_DEFAULT, ConfigError, TestConfig, validate
from kchaos.harness.cli.main import build_parser
from kchaos.harness.options import config_from_args
from kchaos.harness.scenarios.repro import recorded_config
from kchaos.nemesis import check_spec
from kchaos.workloads.java_build import JavaBuildError, clients_version, compile_client
from kchaos.workloads.java_client import JavaProcess
from kchaos.workloads.txn.java import JavaTxnClient


def cfg(*argv: str) -> TestConfig:
    return validate(config_from_args(build_parser().parse_args(["run", "--seed", "7", *argv])), check_spec)


def cli(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[int, list[str], Path]:
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-m", "kchaos", "run", *argv, "--store", str(store)],
                          capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2])
    return proc.returncode, proc.stderr.strip().splitlines(), store


# --- options --------------------------------------------------------------------------------------------------

def test_client_java_records_its_kafka_clients_version_and_a_replay_reads_it_back(tmp_path):
    c = cfg("--workload", "txn", "--client", "java")
    assert (c.workload.client, c.workload.client_version) == ("java", JAVA_CLIENTS_DEFAULT)
    on4 = cfg("--workload", "txn", "--client", "java", "--kafka-version", "4.0.0")
    assert on4.workload.client_version == "4.0.0"  # the brokers' own release: its jars are cached already
    run = tmp_path / "run"
    run.mkdir()
    (run / "test.json").write_text(json.dumps({**on4.to_dict(), "versions": {"kafka": "4.0.0"}}))
    (run / "schedule.json").write_text("[]")
    (run / "results.json").write_text("{}")
    again, _ = recorded_config(run)
    assert (again.workload.client, again.workload.client_version) == ("java", "4.0.0")
    assert json.loads((run / "test.json").read_text())["workload"]["client"] == "java"


def test_a_python_client_run_s_test_json_names_librdkafka():
    w = cfg("--workload", "txn").to_dict()["workload"]
    assert (w["client"], w["client_version"]) == ("python", None)


@pytest.mark.parametrize("change, needle", [
    ({"client_version": "3.7.2"}, "needs kafka-clients 4.0 or later"),
    ({"client_version": None}, "needs kafka-clients 4.0 or later"),
    ({"client": "rust"}, "--client must be one of python, java"),
])
def test_a_test_json_with_a_bad_client_is_refused(change, needle):
    d = cfg("--workload", "txn", "--client", "java").to_dict()
    d["workload"].update(change)
    with pytest.raises(ConfigError, match=needle):
        TestConfig.from_dict(d)


@pytest.mark.parametrize("argv, needle", [
    (["--client", "java", "--producer-processes", "2"], "--producer-processes runs librdkafka producers"),
    (["--workload", "txn", "--client", "jvm"], "argument --client: invalid choice: 'jvm'"),
])
def test_bad_client_options_exit_3_in_one_line_before_creating_anything(tmp_path, argv, needle):
    code, err, store = cli(tmp_path, *argv)
    assert code == 3 and len(err) == 1 and needle in err[0], err
    assert not store.exists()


def test_client_java_without_a_jdk_exits_3_in_one_line_before_creating_anything(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    code, err, store = cli(tmp_path, "--workload", "txn", "--client", "java", env={**os.environ, "PATH": str(empty)})
    assert code == 3 and len(err) == 1, err
    assert "--client java needs a JDK: java and javac not found on PATH" in err[0]
    assert not store.exists()


def test_compiling_without_a_jdk_or_without_kafka_clients_is_an_error(tmp_path, monkeypatch):
    with pytest.raises(JavaBuildError, match="no kafka-clients"):
        clients_version(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaBuildError, match="needs a JDK"):
        compile_client(tmp_path, tmp_path / "cache")


# --- the compiled client --------------------------------------------------------------------------------------

def test_the_client_compiles_with_javac_once_per_source_and_jars(program):
    assert (program.classes / "KchaosTxnClient.class").is_file() and (program.classes / "KchaosCopier.class").is_file()
    assert (program.classes / "log4j.properties").is_file()
    assert program.clients_version == clients_version(program.libs)
    start = time.monotonic()
    assert compile_client(program.libs, program.classes.parent) == program  # cached: no javac
    assert time.monotonic() - start < 0.5
    assert [p.name for p in program.classes.parent.iterdir()] == [program.classes.name]  # nothing left aside


def test_the_client_answers_every_request_on_its_pipe(program):
    """Against a loopback port nothing listens on: open succeeds, initTransactions times out and says so, and
    the JVM closes and exits 0 when its stdin ends."""
    c = cfg("--workload", "txn", "--client", "java", "--delivery-timeout-ms", "1500", "--request-timeout-ms", "1000")
    jvm = JavaProcess(program)
    try:
        client = JavaTxnClient(c, "127.0.0.1:1", None, 0, lambda *a: None, jvm=jvm)
        client.open()
        assert client.init() is False and not client.ready()
        reply = jvm.call(0, {"op": "bogus"}, 30)
        assert reply == {"p": 0, "ok": False, "error": 'unknown op "bogus"'}
        client.close()
    finally:
        jvm.close()
    assert jvm.proc.returncode == 0

