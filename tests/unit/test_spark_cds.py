"""Spark's class archive: made once under the cache by checking a small history, named after the java, the Spark
jars and the driver options it holds for, mapped by every later Spark JVM of the checker, and replaced, never
doubled, when those change."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kchaos.checkers import spark_archive, spark_cds

pytestmark = pytest.mark.spark

STRICT = """
import json, sys
from kchaos.checkers import spark_archive, spark_cds
spark_cds.QUIET += " -Xshare:on"  # a JVM that cannot map the archive, or finds it stale, refuses to start
from kchaos.checkers import check_path
print(json.dumps({"options": spark_cds.driver_java_options(), "counts": check_path(sys.argv[1], "local[2]")["counts"]}))
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cache")
    old = root / "spark" / f"{spark_cds.PREFIX}0123456789abcdef0123.jsa"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"an archive for jars no longer installed")
    mp = pytest.MonkeyPatch()
    mp.setenv("KCHAOS_CACHE", str(root))
    said: list[str] = []
    try:
        assert spark_cds.driver_java_options() == spark_cds.DRIVER_JAVA_OPTIONS
        made = spark_archive.make_archive(said.append)
        assert made == spark_cds.archive_path() and made is not None and made.is_file(), said
        assert not old.exists(), "the stale archive was left beside the new one"
        assert said and "archived" in said[0]
        yield root
    finally:
        mp.undo()


def test_the_archive_is_made_once_and_named_in_the_drivers_options(cache, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(cache))
    path = spark_cds.archive_path()
    assert path is not None and path.parent == cache / "spark"
    before = path.stat().st_mtime_ns
    said: list[str] = []
    assert spark_archive.make_archive(said.append) == path and said == [] and path.stat().st_mtime_ns == before
    assert f"-XX:SharedArchiveFile={path}" in spark_cds.driver_java_options()


def test_a_check_maps_the_archive_which_matches_sparks_own_classpath(cache, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    spark_archive._small_history(run)
    env = {**os.environ, "KCHAOS_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", STRICT, str(run)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert "-Xshare:on" in answer["options"] and "SharedArchiveFile" in answer["options"]
    assert answer["counts"]["acked"] == 6 and answer["counts"]["lost"] == 0


def test_the_archive_is_named_after_the_jars_so_a_replaced_jar_names_another(tmp_path, monkeypatch):
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "spark-core.jar"
    jar.write_bytes(b"one")
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    first = spark_cds.archive_path()
    jar.write_bytes(b"other")
    assert spark_cds.archive_path() != first
    assert spark_cds.driver_java_options() == spark_cds.DRIVER_JAVA_OPTIONS  # none made for these jars

