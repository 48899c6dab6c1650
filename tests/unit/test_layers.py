"""Dependencies run one way: evidence, checkers and reports import neither the nemesis registry nor the cluster
backends (nor the Kafka client those pull in); they read what they need from the run's own files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Every module of the three packages, imported for real in one fresh interpreter.
LOWER = tuple(sorted(
    ".".join(["kchaos", *p.relative_to(ROOT).with_suffix("").parts]).removesuffix(".__init__")
    for top in ("evidence", "checkers", "reports") for p in (ROOT / top).rglob("*.py")))
FORBIDDEN = ("kchaos.nemesis", "kchaos.clusters", "confluent_kafka")


def test_evidence_checkers_and_reports_import_no_nemesis_cluster_or_kafka_client():
    assert len(LOWER) > 60
    code = ("import importlib, json, sys\n"
            f"for m in {LOWER!r}: importlib.import_module(m)\n"
            f"print(json.dumps(sorted({{k for k in sys.modules if k.startswith({FORBIDDEN!r})}})))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_workload_is_known_without_its_clients():
    """What the checkers and reports ask of a workload (core/workload_kind.py) loads no Kafka client: everything
    but `make`."""
    code = ("import json, sys\n"
            "from kchaos.core.promise import Promise\n"
            "from kchaos.core.workload_kind import all_kinds\n"
            "for kind in all_kinds():\n"
            "    kind.checkers(), kind.judge({}, {}, Promise.of({}), {}), kind.acknowledged({}, {}), kind.facts({})\n"
            f"print(json.dumps(sorted({{k for k in sys.modules if k.startswith({FORBIDDEN!r})}})))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_configuration_is_built_without_the_checkers():
    """core/config.py reads a workload's options from the registry: its package's `__init__` loads no checker,
    report or client."""
    code = ("import json, sys\n"
            "from kchaos.core.config import TestConfig, WorkloadConfig\n"
            "for kind in ('queue', 'txn', 'copy'): TestConfig(workload=WorkloadConfig(kind=kind)).to_dict()\n"
            "print(json.dumps(sorted({k for k in sys.modules if k.startswith(('kchaos.checkers', 'kchaos.reports', "
            "'kchaos.evidence', 'pyarrow', *" + repr(FORBIDDEN) + "))})))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
