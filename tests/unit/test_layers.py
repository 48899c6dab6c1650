"""Dependencies run one way: checkers and reports import neither the nemesis registry nor the cluster backends
(nor the Kafka client those pull in); they read what they need from the run's own files."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOWER = ("checkers.timeline", "checkers.observed", "checkers.verdict", "reports.plots", "reports.explain_facts",
         "reports.evidence", "reports.control_plane", "reports.explain_groups", "reports.explain_text",
         "reports.evidence_html", "reports.severity", "reports.heatmap", "reports.compare", "reports.junit",
         "reports.serve", "reports.run_index", "reports.trends", "reports.regressions", "reports.serve_trend",
         "reports.sparkline", "reports.txn_data", "reports.txn_plots", "reports.txn_cycles", "reports.copy_data",
         "reports.run_report", "reports.explain_txn", "reports.explain_txn_text", "reports.txn_evidence",
         "checkers.txn_log")
FORBIDDEN = ("nemesis", "clusters", "confluent_kafka")


def test_checkers_and_reports_import_no_nemesis_cluster_or_kafka_client():
    code = ("import importlib, json, sys\n"
            f"for m in {LOWER!r}: importlib.import_module(m)\n"
            f"print(json.dumps(sorted({{k for k in sys.modules if k.split('.')[0] in {FORBIDDEN!r}}})))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
