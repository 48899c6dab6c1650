"""Spark's Python workers on a local master: forked from kchaos's daemon, with their modules already imported
and Spark's zip archives behind the installed packages."""
from __future__ import annotations

import sys

import pytest
from pyspark import cloudpickle

from kchaos.checkers.spark import DAEMON_MODULE, daemon_settings, is_local
from kchaos.checkers.spark_daemon import PRELOAD, archives_last


def test_the_archives_go_last_in_their_order_and_nothing_else_moves():
    path = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-src.zip", "/venv/site-packages", "/x/y.py",
            "/lib/python311.zip", "/work"]
    assert archives_last(path) == ["/venv/site-packages", "/x/y.py", "/work", "/spark/python/lib/pyspark.zip",
                                   "/spark/python/lib/py4j-src.zip", "/lib/python311.zip"]


@pytest.mark.parametrize("master, local", [("local", True), ("local[2]", True), ("local[*]", True),
                                           ("local[2, 3]", True), ("spark://127.0.0.1:7077", False),
                                           ("local-cluster[2,1,1024]", False), ("yarn", False)])
def test_only_a_local_master_gets_the_daemon(master, local):
    assert is_local(master) is local
    assert (daemon_settings(master, sys.executable) == [("spark.python.daemon.module", DAEMON_MODULE)]) is local


def test_workers_on_another_python_keep_pysparks_daemon():
    assert daemon_settings("local[2]", "/usr/bin/python3-elsewhere") == []


def _worker_state(_: object) -> tuple[list[str], bool]:
    import sys

    zips = [i for i, p in enumerate(sys.path) if p.endswith(".zip")]
    others = [i for i, p in enumerate(sys.path) if not p.endswith(".zip")]
    return [m for m in PRELOAD if m in sys.modules], max(others) < min(zips, default=len(sys.path))


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers need not import this test module


@pytest.mark.spark
def test_a_local_workers_modules_are_loaded_before_its_first_task_and_the_archives_come_last():
    from kchaos.checkers.spark import spark_context

    sc = spark_context("local[2]")
    n = sc.defaultParallelism
    results = sc.parallelize(range(n), n).map(_worker_state).collect()
    # The task imports nothing: what of PRELOAD a worker holds, it had before the task came.
    assert results == [(list(PRELOAD), True)] * n
