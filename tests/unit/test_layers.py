"""Dependencies run one way: checkers and reports import neither the nemesis registry nor the cluster backends
(nor the Kafka client those pull in); they read what they need from the run's own files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOWER = ("kchaos.checkers.queue.timeline", "kchaos.checkers.verdict.observed", "kchaos.checkers.verdict.judge",
         "kchaos.reports.plots", "kchaos.evidence.explain.facts", "kchaos.evidence.decode",
         "kchaos.evidence.control_plane", "kchaos.evidence.explain.groups", "kchaos.evidence.explain.text",
         "kchaos.reports.evidence_html", "kchaos.reports.severity", "kchaos.reports.heatmap",
         "kchaos.reports.compare", "kchaos.reports.junit", "kchaos.reports.serve", "kchaos.reports.run_index",
         "kchaos.reports.trends", "kchaos.reports.regressions", "kchaos.reports.serve_trend",
         "kchaos.reports.sparkline", "kchaos.reports.txn_data", "kchaos.reports.txn_plots",
         "kchaos.reports.txn_cycles", "kchaos.reports.copy_data", "kchaos.reports.run_report",
         "kchaos.evidence.explain.txn", "kchaos.evidence.explain.txn_text", "kchaos.evidence.txn_decode",
         "kchaos.evidence.txn_log")
FORBIDDEN = ("kchaos.nemesis", "kchaos.clusters", "confluent_kafka")


def test_checkers_and_reports_import_no_nemesis_cluster_or_kafka_client():
    code = ("import importlib, json, sys\n"
            f"for m in {LOWER!r}: importlib.import_module(m)\n"
            f"print(json.dumps(sorted({{k for k in sys.modules if k.startswith({FORBIDDEN!r})}})))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
