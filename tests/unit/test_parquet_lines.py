"""write_from_lines: a table of history lines gives the same history.parquet, and the same check, as the JSON."""
from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpora.queue import PLANTS, generate, write

from kchaos.checkers.parquet import convert, parquet_path
from kchaos.checkers.parquet_lines import write_from_lines
from kchaos.checkers.queue.check import QueueChecker
from kchaos.checkers.queue.reference import check_reference
from kchaos.checkers.spark import spark_session

MASTER = "local[2]"
_OWN = ("index", "time", "process", "type", "f", "nemesis")
_COLUMNS = ("index", "time", "process", "type", "f", "topic", "partition", "value", "offset", "records",
            "complete", "node", "error", "producer", "generation")


@pytest.fixture(scope="module")
def spark():
    return spark_session(MASTER)


def table_of(ops) -> pa.Table:
    """The lines as the harness would hand them over: client fields as columns, nemesis lines with detail."""
    rows = []
    for op in ops:
        if op["process"] == "nemesis":
            rest = {k: v for k, v in op.items() if k not in _OWN}
            # A nemesis line's integer partition or value is a column too (a map of partitions is not).
            ints = {k: op[k] for k in ("partition", "value") if type(op.get(k)) is int}
            rows.append({**{k: op.get(k) for k in _OWN}, **ints, "process": "nemesis",
                         "detail": json.dumps(rest, separators=(",", ":"), sort_keys=True)})
        else:
            rows.append({**{k: op.get(k) for k in _COLUMNS}, "process": str(op["process"])})
    schema = pa.schema([("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()),
                        ("type", pa.string()), ("f", pa.string()), ("topic", pa.string()),
                        ("partition", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()),
                        ("records", pa.list_(pa.list_(pa.int64()))), ("complete", pa.bool_()),
                        ("node", pa.string()), ("error", pa.string()), ("producer", pa.int64()),
                        ("generation", pa.int64()),
                        ("nemesis", pa.string()), ("detail", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.mark.spark
def test_write_from_lines_matches_convert(spark, tmp_path):
    corpus = generate(11, sends=1500, in_flight=3, idempotent=True, plant=dict.fromkeys(PLANTS, 2))
    # The JSON-converted run and the table-written run: same history bytes, separate directories.
    from_json = write(corpus, tmp_path / "json")
    from_table = tmp_path / "table"
    shutil.copytree(from_json, from_table)
    convert(from_json / "history.jsonl")
    out = write_from_lines(table_of(corpus.ops), from_table / "history.jsonl")
    assert out == parquet_path(from_table / "history.jsonl")
    # convert() finds it up to date (validated) and does not rewrite it.
    mtime = out.stat().st_mtime_ns
    assert convert(from_table / "history.jsonl") == out and out.stat().st_mtime_ns == mtime
    assert pq.read_table(out).equals(pq.read_table(parquet_path(from_json / "history.jsonl")))
    checker = QueueChecker(master=MASTER)
    a = checker.check(corpus.test, from_json / "history.jsonl")
    b = checker.check(corpus.test, from_table / "history.jsonl")
    assert a == b
    ref = check_reference(corpus.ops, corpus.test)
    assert a["counts"] == ref["counts"] and a["counts"]["nonmonotonic_send"] == 2
    assert a["valid"] is False


def test_write_from_lines_falls_back_to_json_when_a_check_fails(tmp_path):
    corpus = generate(12, sends=50)
    run = write(corpus, tmp_path / "run")
    table = table_of(corpus.ops)
    # A completion with no invocation before it: the table cannot be vouched for.
    bad = table.slice(1)
    out = write_from_lines(bad, run / "history.jsonl")
    assert out == parquet_path(run / "history.jsonl")
    meta = json.loads(pq.read_schema(out).metadata[b"kchaos.history"])
    assert meta["validated"] is False
    # What was written is the JSON's content, not the (shorter) table's.
    assert pq.read_table(out).num_rows == len(corpus.ops)


@pytest.mark.spark
def test_runs_checked_in_one_process_share_one_spark_context(spark, tmp_path):
    """What `kchaos suite` and `kchaos scenario` rely on: every run's check_path reuses the session."""
    from kchaos.checkers import check_path

    first = check_path(write(generate(21, sends=100), tmp_path / "a"), MASTER)
    context = spark_session(MASTER).sparkContext
    app = context.applicationId
    second = check_path(write(generate(22, sends=100), tmp_path / "b"), MASTER)
    assert spark_session("local[1]").sparkContext is context and context.applicationId == app
    assert first["counts"]["acked"] > 0 and second["counts"]["acked"] > 0
