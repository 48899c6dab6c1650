"""Run directories cut from real runs (tests/unit/data/evidence/NAME), whose KRaft metadata log decodes from the
output of Kafka's dump tool recorded beside them (dump-metadata.txt), so no Kafka jars are needed."""
from __future__ import annotations

import shutil
from pathlib import Path

from kchaos.evidence.decode import decode_metadata
from kchaos.evidence.kraft_metadata import MetadataLog

DATA = Path(__file__).parent / "data" / "evidence"


def recorded_run(tmp_path: Path, name: str) -> tuple[Path, MetadataLog]:
    """A copy of the recorded run `name` at tmp_path/run, and its metadata log."""
    run = tmp_path / "run"
    shutil.copytree(DATA / name, run)
    lines = (DATA / name / "dump-metadata.txt").read_text().splitlines()
    meta, notes = decode_metadata(run, lambda test: Path("/no/jars"), dumper=lambda *a, **k: lines)
    assert meta is not None, notes
    return run, meta
