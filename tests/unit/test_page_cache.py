"""The page-cache model: what each node's lazyfs is told, and the one line every report states."""
import json

import pytest

from kchaos.core.config import ClusterConfig, ConfigError, TestConfig, validate
from kchaos.core.page_cache import KERNEL, NEVER, describe, parse_vm, plan, record


def test_the_kernel_model_takes_the_nodes_expiry_and_flusher_interval():
    w = plan(KERNEL, None, (3000, 500))
    assert (w.model, w.age_s, w.interval_s) == (KERNEL, 30.0, 5.0)
    assert w.env() == {"KCHAOS_WRITEBACK_AGE": "30", "KCHAOS_WRITEBACK_INTERVAL": "5"}
    tuned = plan(KERNEL, None, (1500, 100))  # a node tuned by its operator is emulated as it is
    assert (tuned.age_s, tuned.interval_s) == (15.0, 1.0)


def test_an_unreadable_node_gets_linuxs_defaults_and_says_so():
    w = plan(KERNEL, None, None)
    assert (w.age_s, w.interval_s) == (30.0, 5.0)
    assert "defaults" in w.source


def test_periodic_writeback_off_on_the_node_means_never():
    w = plan(KERNEL, None, (3000, 0))
    assert w.age_s is None and w.env() == {}
    assert "off" in w.source


def test_never_written_back_and_a_zero_age_are_the_worst_case():
    for w in (plan(NEVER, None, (3000, 500)), plan(KERNEL, 0.0, (3000, 500))):
        assert (w.model, w.age_s, w.env()) == (NEVER, None, {})


def test_an_age_set_by_hand_keeps_the_nodes_flusher():
    w = plan(KERNEL, 10.0, (3000, 500))
    assert (w.model, w.age_s, w.interval_s) == ("writeback-age", 10.0, 5.0)


def test_parse_vm_wants_two_integers():
    assert parse_vm("3000\n500\n") == (3000, 500)
    assert parse_vm("3000\n") is None and parse_vm("x y") is None


def _test(storage="lazyfs", **nodes):
    return {"cluster": {"storage": storage}, "page_cache": record(nodes, storage) if nodes else None}


def test_describe_says_the_model_in_one_line():
    kernel = describe(_test(n1=plan(KERNEL, None, (3000, 500)), n2=plan(KERNEL, None, (3000, 500))))
    assert kernel.startswith("page cache: as Linux keeps it: written back once 30 s old") and "every 5 s" in kernel
    never = describe(_test(n1=plan(NEVER, None, (3000, 500))))
    assert "never written back" in never
    mixed = describe(_test(n1=plan(KERNEL, None, (3000, 500)), n2=plan(KERNEL, None, (1000, 500))))
    assert mixed.startswith("page cache: differs by node") and "n2" in mixed
    assert "\n" not in kernel + never + mixed


def test_describe_reads_runs_made_before_the_model_was_recorded():
    # such runs never wrote back unless --writeback-age said so
    assert "never written back" in describe({"cluster": {"storage": "lazyfs", "writeback_age_s": 0.0}})
    assert "30 s" in describe({"cluster": {"storage": "lazyfs", "writeback_age_s": 30.0}})
    assert "no lazyfs" in describe({"cluster": {"storage": "plain"}})


def test_the_options_are_checked():
    assert validate(TestConfig(cluster=ClusterConfig(page_cache=NEVER))).cluster.page_cache == NEVER
    with pytest.raises(ConfigError, match="--page-cache must be one of"):
        validate(TestConfig(cluster=ClusterConfig(page_cache="linux")))
    with pytest.raises(ConfigError, match="takes no --writeback-age"):
        validate(TestConfig(cluster=ClusterConfig(page_cache=NEVER, writeback_age_s=30.0)))
    with pytest.raises(ConfigError, match=">= 0"):
        validate(TestConfig(cluster=ClusterConfig(writeback_age_s=-1.0)))


def test_a_run_without_lazyfs_records_no_model():
    assert record({}, "plain") == {"model": None, "storage": "plain", "nodes": {}}
    assert "no lazyfs" in describe({"cluster": {"storage": "plain"}, "page_cache": record({}, "plain")})


@pytest.mark.parametrize("model, age", [(NEVER, None), (KERNEL, None), (KERNEL, 20.0)])
def test_a_replay_keeps_the_recorded_page_cache(tmp_path, model, age):
    from kchaos.harness.scenarios.repro import recorded_config
    recorded = TestConfig(cluster=ClusterConfig(page_cache=model, writeback_age_s=age)).to_dict()
    (tmp_path / "test.json").write_text(json.dumps(recorded))
    (tmp_path / "schedule.json").write_text("[]")
    (tmp_path / "results.json").write_text("{}")
    cfg, _ = recorded_config(tmp_path)
    assert (cfg.cluster.page_cache, cfg.cluster.writeback_age_s) == (model, age)
