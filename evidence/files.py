"""Where a run directory keeps Kafka's own files: the layout the cluster backends write and the reports read.

`RUN/evidence/raw/<node>/` holds what was copied off each node before teardown
(the topic's partition directories and the KRaft metadata log, METADATA_DIR),
with `raw/collect.json` saying what was copied and skipped; `RUN/evidence/`
holds what `kchaos.evidence.decode` decodes from it. docs/evidence.md describes
the files.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["EVIDENCE_DIR", "RAW_DIR", "COLLECT_FILE", "METADATA_DIR", "SEGMENTS_FILE", "METADATA_FILE", "ISR_FILE",
           "VIEWS_FILE",
           "HISTORY_START_KEY", "SHARE_STATE_DIR", "TXN_STATE_DIR", "TXN_STATE_FILE", "TXN_EXPLANATION_FILE",
           "read_isr", "read_json_object", "read_jsonl"]

HISTORY_START_KEY = "history_start_unix_ms"  # in test.json: the wall clock (unix ms) at history time 0

VIEWS_FILE = "views.json"  # in EVIDENCE_DIR: every broker's own view of the partitions at the end (clusters.views)
ISR_FILE = "isr.jsonl"  # in the run directory: the ISR of every partition, sampled each second by the harness's monitor

EVIDENCE_DIR = "evidence"  # under the run directory
RAW_DIR = "raw"  # under EVIDENCE_DIR: one directory per node
COLLECT_FILE = "collect.json"  # in RAW_DIR: what was copied from each node, and what was skipped
METADATA_DIR = "__cluster_metadata-0"  # the KRaft metadata log's directory, on a node and in RAW_DIR/<node>
SEGMENTS_FILE = "segments.jsonl"  # in EVIDENCE_DIR: every batch of the topic, decoded
METADATA_FILE = "metadata.jsonl"  # in EVIDENCE_DIR: the topic's partition states and broker events, decoded
TXN_STATE_DIR = "__transaction_state"  # the transaction coordinators' log: RAW_DIR/<node>/__transaction_state-<p>
SHARE_STATE_DIR = "__share_group_state"  # the share coordinators' log: RAW_DIR/<node>/__share_group_state-<p>
TXN_STATE_FILE = "txn_state.jsonl"  # in EVIDENCE_DIR: every transactional id's state changes, decoded
TXN_EXPLANATION_FILE = "txn_explanation.json"  # in EVIDENCE_DIR: a txn run's anomalous transactions explained


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON file's object (an explanation, say), or None when it is absent, unreadable or not an object."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def read_jsonl(path: Path) -> Iterator[dict]:
    """The JSON objects of a JSONL file, line by line; lines that do not parse (a truncated last line) or are
    not objects are skipped; nothing if the file is absent."""
    if not Path(path).exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(d, dict):
                yield d


def read_isr(path: Path) -> list[dict]:
    """Every complete line of an isr.jsonl (a truncated last line is skipped); [] if the file is absent."""
    return list(read_jsonl(path))
