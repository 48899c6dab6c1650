"""The results store: `<store>/<test-name>/<UTC timestamp>/`, with `<store>/latest` at the newest run (a suite's
or scenario's runs included)."""
from __future__ import annotations

import json
import os
import platform
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from kchaos.core import __version__
from kchaos.core.config import TestConfig
from kchaos.core.suite_files import STATE_FILE


class StoreError(ValueError):
    """The store path is unusable (exit code 3)."""


def check_store(store: str) -> Path:
    """Return the store path if it is a directory or can become one; raise StoreError otherwise."""
    p = Path(store).expanduser()
    if p.exists() and not p.is_dir():
        raise StoreError(f"--store {store}: exists and is not a directory")
    parent = next((a for a in [p, *p.parents] if a.exists()), Path("/"))
    if not os.access(parent, os.W_OK):
        raise StoreError(f"--store {store}: {parent} is not writable")
    return p


def stamp() -> str:
    """The current UTC time as a directory name, e.g. 20261122T035547.035Z (sorts by time)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")[:-4] + "Z"


def stamped_dir(parent: Path) -> Path:
    """Create and return `parent/<stamp>`, a directory named by a stamp no sibling has (parents made)."""
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        d = parent / stamp()
        try:
            d.mkdir()
            return d
        except FileExistsError:
            time.sleep(0.001)  # two in one millisecond: the next stamp still sorts by time


def point_latest(parent: Path, target: Path) -> None:
    """Make `parent/latest` a relative link to `target` (below `parent`), replacing any it was, in one rename."""
    tmp = parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target.relative_to(parent))
    tmp.replace(parent / "latest")


def results_root(store: Path) -> Path:
    """The results root of runs made in `store`: `store` itself, or, when `store` is a suite's or scenario's run
    (`<root>/<suites|scenarios>/<name>/<stamp>`, holding its suite.json), that root."""
    return store.parents[2] if (store / STATE_FILE).is_file() and len(store.parents) > 2 else store


def new_run_dir(store: Path, test_name: str) -> Path:
    """Create a fresh run directory (`stamped_dir`) and point the results root's `latest` at it
    (`results_root`): the newest run is `<root>/latest`, whether it ran alone or in a suite or scenario."""
    run = stamped_dir(store / test_name)
    point_latest(results_root(store), run)
    return run


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions(kafka_version: str, kafka_source: str) -> dict[str, Any]:
    """Versions of everything that shapes a result: Kafka, the client, the harness, Spark."""
    import confluent_kafka

    return {"kafka": kafka_version, "kafka_source": kafka_source, "kchaos": __version__,
            "confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
            "pyspark": _version("pyspark"), "python": platform.python_version()}


def write_test_json(run: Path, cfg: TestConfig, vers: dict[str, Any], argv: list[str]) -> Path:
    """Write `test.json`: every option, the seed, the versions and the command line; enough to rerun."""
    path = run / "test.json"
    path.write_text(json.dumps({**cfg.to_dict(), "versions": vers, "argv": argv}, indent=2) + "\n")
    return path


def add_to_test_json(run: Path, **fields: Any) -> None:
    """Add top-level fields to the run's test.json, e.g. `history_start_unix_ms` once the history opens."""
    path = run / "test.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}, indent=2) + "\n")


def load_test_json(path: Path) -> dict[str, Any]:
    """Read a test.json (empty dict if absent)."""
    return json.loads(path.read_text()) if path.exists() else {}
