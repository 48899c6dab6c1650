"""Configuration validation: every invalid combination is refused with a message naming it."""
import subprocess
import sys

import pytest

from kchaos.core.config import ConfigError, TestConfig, validate
from kchaos.harness.cli.main import build_parser, main
from kchaos.harness.options import config_from_args
from kchaos.nemesis import check_spec


def cfg(**opts):
    args = build_parser().parse_args(["run", "--seed", "1", *opts.get("argv", [])])
    return config_from_args(args)


def test_defaults_are_valid():
    c = validate(cfg(), check_spec)
    assert (c.producer.acks, c.topic.replication_factor, c.topic.min_insync) == ("all", 3, 2)


@pytest.mark.parametrize("argv, needle", [
    (["--min-insync", "4"], "larger than --rf"),
    (["--flush-messages", "-1"], "--flush-messages must be >= 0"),
    (["--rf", "4"], "larger than --nodes"),
    (["--acks", "2"], "--acks"),
    (["--rate", "-5"], "--rate"),
    (["--rate", "0"], "--rate"),
    (["--partitions", "0"], "--partitions"),
    (["--time-limit", "0"], "--time-limit"),
    (["--idempotence", "--acks", "1"], "--idempotence needs --acks all"),
    (["--idempotence", "--max-in-flight", "6"], "max-in-flight"),
    (["--socket-timeout-ms", "0"], "socket-timeout-ms"),
    (["--workload", "txn", "--socket-timeout-ms", "60000"], "transaction timeout"),
    (["--nemesis", "kill-leader,bogus"], "unknown nemesis 'bogus'"),
    (["--subnet", "8.8.8.0/24"], "private"),
    (["--subnet", "nonsense"], "not a network"),
    (["--controllers", "2"], "--controllers"),
    (["--interval", "-1"], "--interval"),
    (["--kafka-version", "latest"], "--kafka-version"),
    (["--kafka-jit", "c2"], "--kafka-jit must be one of c1, tiered"),
    (["--in-flight", "0"], "--in-flight must be >= 1"),
    (["--producer-processes", "-1"], "--producer-processes must be 0..--producers"),
    (["--producers", "2", "--producer-processes", "3"], "--producer-processes must be 0..--producers"),
])
def test_invalid_combinations(argv, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        validate(cfg(argv=argv), check_spec)


def test_round_trip_through_test_json():
    c = validate(cfg(argv=["--acks", "1", "--nemesis", "kill-leader,none", "--unclean", "--in-flight", "50",
                           "--producer-processes", "2", "--kafka-jit", "tiered"]), check_spec)
    assert (c.workload.in_flight, c.workload.producer_processes, c.cluster.kafka_jit) == (50, 2, "tiered")
    again = TestConfig.from_dict(c.to_dict())
    assert again == c


def test_from_dict_rejects_unknown_keys():
    d = TestConfig().to_dict()
    d["producer"]["akcs"] = "all"
    with pytest.raises(ConfigError, match="producer.akcs"):
        TestConfig.from_dict(d)


def test_cli_bad_input_exits_3_before_creating_anything(tmp_path, capsys):
    store = tmp_path / "store"
    code = main(["run", "--min-insync", "5", "--store", str(store)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert len(err) == 1 and "min-insync" in err[0]
    assert not store.exists()


def test_cli_unparseable_option_exits_3():
    proc = subprocess.run([sys.executable, "-m", "kchaos", "run", "--nodes", "three"],
                          capture_output=True, text=True)
    assert proc.returncode == 3
    assert "--nodes" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_store_that_is_a_file_is_bad_input(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["run", "--store", str(f)]) == 3
    assert "not a directory" in capsys.readouterr().err


def test_missing_kafka_dist_is_bad_input(tmp_path, capsys):
    assert main(["run", "--kafka-dist", str(tmp_path / "nope")]) == 3
    assert "no such file" in capsys.readouterr().err


def test_check_missing_path_exits_3(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing")]) == 3
    assert "no such file" in capsys.readouterr().err


def test_cluster_ids_never_start_with_a_dash():
    # kafka-storage format -t ID reads an ID starting with '-' as an option and fails (seen in CI).
    from kchaos.clusters.docker import new_cluster_id
    ids = [new_cluster_id() for _ in range(5000)]  # about 78 would start with '-' by chance
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
