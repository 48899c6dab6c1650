"""Unit tests for checkers/parquet.py: history.jsonl -> history.parquet, validating on the way."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from corpora.queue import generate

import kchaos.checkers.parquet as P
from kchaos.checkers import CheckInputError, validate_history
from kchaos.checkers.parquet import client_op_problem, convert, pairing_problem, parquet_path
from kchaos.checkers.spark import CORRUPT, HISTORY_SCHEMA, read_history_df, readable_path, spark_session
from kchaos.core.history import HistoryError, read_history

MASTER = "local[2]"


def reference_validate(path: Path) -> None:
    """validate_history as it was before Parquet: one Python pass, the spec for the messages."""
    outstanding: dict[Any, Any] = {}
    try:
        for n, rec in enumerate(read_history(path), 1):
            if rec["process"] == "nemesis":
                continue
            problem = client_op_problem(rec) or pairing_problem(rec, outstanding)
            if problem:
                where = rec["index"] + 1 if isinstance(rec.get("index"), int) else f"record {n}"
                raise CheckInputError(f"{path}:{where}: {problem}")
    except HistoryError as e:
        raise CheckInputError(str(e)) from None


def corpus_lines(seed: int = 1, sends: int = 120) -> list[str]:
    c = generate(seed, sends=sends, plant={"lost": 1, "duplicate": 1, "unexpected": 1})
    return [json.dumps(op, separators=(",", ":")) for op in c.ops]


def write_text(tmp_path: Path, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "history.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of ~2 KB, so a small history spans many chunks and state crosses their edges."""
    monkeypatch.setattr(P, "CHUNK_BYTES", 2048)


def rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


# --- conversion ------------------------------------------------------------------------

def test_clean_history_takes_the_fast_path_and_keeps_every_line(tmp_path, small_chunks, monkeypatch):
    lines = corpus_lines()
    hist = write_text(tmp_path, "".join(line + "\n" for line in lines))
    monkeypatch.setattr(P._Converter, "_slow", lambda self, data: pytest.fail("slow path taken"))
    out = convert(hist)
    assert out == tmp_path / "history.parquet" == parquet_path(hist)
    got = rows(out)
    assert pq.read_schema(out).names == HISTORY_SCHEMA.names
    assert sorted(r["index"] for r in got) == list(range(len(lines)))
    by_index = {r["index"]: r for r in got}
    for line in lines:
        rec = json.loads(line)
        row = by_index[rec["index"]]
        assert row["type"] == rec["type"] and row["f"] == rec["f"]
        assert row["process"] == (rec["process"] if rec["process"] == "nemesis" else str(rec["process"]))
        if rec["process"] != "nemesis":
            assert row[CORRUPT] is None
            assert row["records"] == rec.get("records")
            assert row["offset"] == rec.get("offset")
            assert row["complete"] == rec.get("complete")


def derived_model(lines: list[str]) -> list[dict[str, Any]]:
    """The derived columns, one record at a time: what checkers/pairing.py vectorises."""
    last: dict[Any, dict[str, Any]] = {}
    streams: dict[Any, int] = {}
    high: dict[tuple[Any, Any], int] = {}
    nemesis = 0
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            out.append({"latency_ns": None, "stream": 0, "epoch": nemesis, "acked_before": None,
                        "value": None, "partition": None})
            continue
        proc = rec.get("process")
        key = None if proc is None else (proc if isinstance(proc, str) else json.dumps(proc))
        prev = last.get(key) if key is not None else None
        paired = (rec.get("type") in ("ok", "fail", "info") and prev is not None
                  and prev["type"] == "invoke" and prev["f"] == rec.get("f"))
        ints = {k: rec.get(k) if isinstance(rec.get(k), int) and not isinstance(rec.get(k), bool) else None
                for k in ("value", "partition", "offset")}
        row = {"latency_ns": rec["time"] - prev["time"] if paired else None,
               "value": ints["value"] if ints["value"] is not None or not paired else prev["value"],
               "partition": ints["partition"] if ints["partition"] is not None or not paired
               else prev["partition"],
               "epoch": prev["epoch"] if paired else nemesis}
        usable = key is not None and proc != "nemesis"
        if usable and (rec.get("f") == "assign" or (rec.get("f") == "poll" and rec.get("type") == "info")):
            streams[key] = streams.get(key, 0) + 1
        row["stream"] = streams.get(key, 0) if key is not None else 0
        row["acked_before"] = None
        if usable and rec.get("f") == "send" and rec.get("type") == "ok" \
                and row["partition"] is not None and ints["offset"] is not None:
            k = (key, row["partition"])
            row["acked_before"] = high.get(k)
            high[k] = max(high.get(k, ints["offset"]), ints["offset"])
        if key is not None:
            last[key] = {"type": rec.get("type"), "f": rec.get("f"), "time": rec.get("time"),
                         "value": row["value"], "partition": row["partition"], "epoch": nemesis}
        if proc == "nemesis":
            nemesis += 1
        out.append(row)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_derived_columns_match_a_line_by_line_model(tmp_path, small_chunks, seed):
    c = generate(seed, sends=150, plant={"nonmonotonic_send": 2, "poll_skip": 1})
    lines = [json.dumps(op, separators=(",", ":")) for op in c.ops]
    # Nemesis lines of any shape, an assign and a poll that completes info, spread across chunks.
    extra = [{"index": -1, "time": 5, "process": "nemesis", "type": "invoke", "f": "kill", "nemesis": "kill"},
             {"index": -1, "time": 9, "process": "nemesis", "type": "ok", "f": "kill", "nemesis": "kill",
              "nodes": ["n1"], "value": {"odd": 1}}]
    for at in (3, 40, 41, 200):
        lines.insert(min(at, len(lines)), json.dumps(extra[at % 2]))
    hist = write_text(tmp_path, "".join(line + "\n" for line in lines))
    got = rows(convert(hist, validate=False))
    want = derived_model(lines)
    for i, (g, w) in enumerate(zip(got, want)):
        assert {k: g[k] for k in w} == w, (i, lines[i])
    assert len(got) == len(want)
    assert any(g["acked_before"] is not None and g["offset"] <= g["acked_before"] for g in got)
    assert max(g["epoch"] for g in got) == sum('"nemesis"' in line for line in lines) >= 4


@pytest.mark.spark
def test_spark_reads_the_converted_rows(tmp_path, small_chunks):
    odd = {"value": {"x": [1, "a"]}, "partition": [["n1"], ["n2", "n3"]], "node": ["n1"],
           "offset": 1.5, "records": "x", "complete": "yes", "targets": None}
    lines = corpus_lines(sends=40)
    lines.insert(5, json.dumps({"index": 900, "time": 1, "process": "nemesis", "type": "info", "f": "kill",
                                "nemesis": "kill", **odd}, separators=(",", ":")))
    text = "".join(line + "\n" for line in lines) + '{"index": 999, "process": 0, "ty'
    hist = write_text(tmp_path / "run [x]:1", text)
    convert(hist)
    spark = spark_session(MASTER)
    with readable_path(hist) as path:
        got = read_history_df(spark, path)
        assert got.schema == HISTORY_SCHEMA
        got_rows = [r.asDict(recursive=True) for r in got.collect()]
    assert [r["index"] for r in got_rows[:-1]] == [json.loads(x)["index"] for x in lines]
    assert sum(r[CORRUPT] is not None for r in got_rows) == 2  # the odd nemesis line and the tail
    weird = got_rows[5]
    assert weird["nemesis"] == "kill" and json.loads(weird["detail"])["targets"] is None
    assert json.loads(weird["detail"])["value"] == {"x": [1, "a"]} and weird["partition"] is None


def test_reused_while_up_to_date_and_reconverted_when_the_history_grew(tmp_path):
    lines = corpus_lines(sends=30)
    hist = write_text(tmp_path, "".join(line + "\n" for line in lines[:40]) + lines[40][:25])
    out = convert(hist)
    first = out.stat().st_mtime_ns, out.stat().st_ino
    assert len(rows(out)) == 41 and rows(out)[-1][CORRUPT] == lines[40][:25]
    assert convert(hist) == out
    assert (out.stat().st_mtime_ns, out.stat().st_ino) == first  # reused, not rewritten
    # A killed run resumed: the truncated line is completed and more lines follow.
    with open(hist, "a", encoding="utf-8") as fh:
        fh.write(lines[40][25:] + "\n" + "".join(line + "\n" for line in lines[41:]))
    got = rows(convert(hist))
    assert len(got) == len(lines) and all(r[CORRUPT] is None for r in got
                                          if r["process"] != "nemesis")
    assert not list(tmp_path.glob(".*tmp"))


def test_other_converter_version_is_not_reused(tmp_path, monkeypatch):
    hist = write_text(tmp_path, "".join(line + "\n" for line in corpus_lines(sends=10)))
    out = convert(hist)
    ino = out.stat().st_ino
    monkeypatch.setattr(P, "CONVERTER_VERSION", "0-test")
    convert(hist)
    assert out.stat().st_ino != ino


def test_lenient_conversion_is_redone_when_validation_is_asked(tmp_path):
    lines = corpus_lines(sends=10)
    lines[3] = "this is not json"
    hist = write_text(tmp_path, "".join(line + "\n" for line in lines))
    out = convert(hist, validate=False)
    assert [r[CORRUPT] for r in rows(out)].count("this is not json") == 1
    with pytest.raises(CheckInputError, match=r"history.jsonl:4: not JSON"):
        convert(hist)
    with pytest.raises(CheckInputError, match=r"history.jsonl:4: not JSON"):
        validate_history(hist)


def test_failed_validation_writes_nothing(tmp_path):
    hist = write_text(tmp_path, '{"index": 0, "process": 0, "type": "ok", "f": "send", "value": 1}\n')
    with pytest.raises(CheckInputError, match=r":1: ok send of process 0 completes no invocation"):
        convert(hist)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]


@pytest.mark.parametrize("tail", ['{"index": 99, "process": 0, "type": "ok", "f": "send", "val',
                                  '{"index": 99, "proc\xe9', "   "])
def test_truncated_last_line_is_tolerated_and_kept_as_unparsed(tmp_path, small_chunks, tail):
    lines = corpus_lines(sends=20)
    hist = write_text(tmp_path, "".join(line + "\n" for line in lines) + tail)
    # Cut in the middle of a UTF-8 character, as a killed writer may leave it.
    if "\xe9" in tail:
        hist.write_bytes(hist.read_bytes()[:-1])
    validate_history(hist)
    got = rows(convert(hist))
    corrupt = [r for r in got if r[CORRUPT] is not None and r["process"] is None]
    assert len(got) == len(lines) + len(corrupt)
    assert len(corrupt) == (0 if not tail.strip() else 1)


def test_complete_last_line_without_newline_is_a_record(tmp_path):
    lines = corpus_lines(sends=5)
    hist = write_text(tmp_path, "\n".join(lines))
    assert len(rows(convert(hist))) == len(lines)


def test_nemesis_lines_with_any_types_are_tolerated(tmp_path, small_chunks):
    lines = corpus_lines(sends=20)
    odd = [{"process": "nemesis", "type": "info", "f": 7, "value": [1, {"a": None}], "index": "x",
            "time": 1.5, "partition": {"n1": ["n2"]}, "records": [[1, "a"]], "complete": None,
            "offset": True, "node": 3, "error": False, "topic": [None]},
           {"process": "nemesis", "type": "invoke", "f": "start", "value": None}]
    text = "".join(line + "\n" for line in lines[:7] + [json.dumps(o) for o in odd] + lines[7:])
    hist = write_text(tmp_path, text)
    reference_validate(hist)
    got = rows(convert(hist))
    nemesis = [r for r in got if r["process"] == "nemesis"]
    assert len(got) == len(lines) + 2
    assert sum(1 for line in lines if '"nemesis"' in line) + 2 == len(nemesis)
    weird = next(r for r in nemesis if r["f"] == "7")
    assert (weird["index"], weird["time"], weird["offset"], weird["records"]) == (None,) * 4
    assert weird["value"] is None and weird["node"] == "3" and weird[CORRUPT]
    assert json.loads(weird["detail"])["value"] == [1, {"a": None}]


# --- malformed input: the same one-line errors as validate_history always gave ---------

def _set(i: int, **fields: Any):
    def edit(lines: list[str]) -> list[str]:
        rec = json.loads(lines[i])
        rec.update(fields)
        lines[i] = json.dumps(rec)
        return lines
    return edit


def _first(pred, lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if pred(json.loads(line)))


def _mutations(lines: list[str]) -> dict[str, Any]:
    send_ok = _first(lambda r: r["f"] == "send" and r["type"] == "ok", lines[100:]) + 100
    poll_ok = _first(lambda r: r["f"] == "poll" and r["type"] == "ok" and r["records"], lines[150:]) + 150
    drain_ok = _first(lambda r: r["f"] == "drain" and r["type"] == "ok", lines)
    invoke = _first(lambda r: r["type"] == "invoke" and r["process"] != "nemesis", lines[200:]) + 200
    return {
        "not json": lambda ls: ls[:120] + ["this is not json"] + ls[120:],
        "array": lambda ls: ls[:130] + ["[1, 2]"] + ls[130:],
        "unknown type": _set(140, type="maybe"),
        "missing f": lambda ls: ls[:145] + ['{"index": 7, "process": 1, "type": "ok"}'] + ls[145:],
        "send value": _set(send_ok, value="x"),
        "send value null": _set(send_ok, value=None),
        "partition": _set(send_ok, partition=1.0),
        "offset": _set(send_ok, offset="three"),
        "huge offset": _set(send_ok, offset=1 << 70),
        "record shape": lambda ls: _set(poll_ok, records=json.loads(ls[poll_ok])["records"] + [[0, 1]])(ls),
        "record null": lambda ls: _set(poll_ok, records=[[0, None, 1]])(ls),
        "records missing": _set(poll_ok, records=None),
        "complete": _set(drain_ok, complete="yes"),
        "complete null": _set(drain_ok, complete=None),
        "completion without invoke": lambda ls: ls[:invoke] + ls[invoke + 1:],
        "double completion": lambda ls: ls[:send_ok + 1] + [ls[send_ok]] + ls[send_ok + 1:],
        "other f": _set(send_ok, f="poll", records=[]),
        "no index": lambda ls: _set(send_ok, value="x")(ls) and [
            line if i != send_ok else line.replace('"index": ', '"idx": ') for i, line in enumerate(ls)],
        "blank lines then bad": lambda ls: ls[:50] + ["", "  "] + ls[50:120] + ["nope"] + ls[120:],
        "process null": _set(send_ok, process=None),
        "bad utf-8 inside": lambda ls: ls[:60] + ['{"index": 1, "process": "nemesis", "type": "info", "f": "\udcff"}']
        + ls[60:],
    }


MUTATIONS = list(_mutations(corpus_lines()))


@pytest.mark.parametrize("chunk", [2048, 1 << 20])
@pytest.mark.parametrize("name", MUTATIONS)
def test_malformed_input_names_the_line_like_validate_history_did(tmp_path, monkeypatch, name, chunk):
    monkeypatch.setattr(P, "CHUNK_BYTES", chunk)
    lines = _mutations(corpus_lines())[name](corpus_lines())
    text = "".join(line + "\n" for line in lines)
    hist = tmp_path / "history.jsonl"
    hist.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    try:
        reference_validate(hist)
        want = None
    except CheckInputError as e:
        want = str(e)
    except UnicodeDecodeError:
        want = "unreadable"
    if want is None:  # e.g. an offset too big for Spark: not rejected, the row is flagged corrupt
        assert any(r[CORRUPT] for r in rows(convert(hist)))
        return
    with pytest.raises(CheckInputError) as got:
        convert(hist)
    assert want in str(got.value)
    assert not parquet_path(hist).exists()


def test_clean_corpus_validates_like_validate_history(tmp_path, small_chunks):
    for seed in range(3):
        lines = corpus_lines(seed=seed, sends=150)
        hist = write_text(tmp_path / str(seed), "".join(line + "\n" for line in lines))
        reference_validate(hist)
        validate_history(hist)
        assert len(rows(parquet_path(hist))) == len(lines)


def test_unreadable_history(tmp_path):
    with pytest.raises(CheckInputError, match="nope.jsonl: unreadable"):
        convert(tmp_path / "nope.jsonl")
    assert os.path.exists(tmp_path) and not list(tmp_path.iterdir())


def test_a_read_only_run_directory_is_converted_to_the_cache(tmp_path, monkeypatch):
    src = write_text(tmp_path / "src", "".join(line + "\n" for line in corpus_lines(sends=20)))
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(src.parent), str(ro)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount read-only here")
    try:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        out = convert(ro / "history.jsonl")
        assert out == P.cache_path(ro / "history.jsonl") and out.is_relative_to(tmp_path / "cache")
        assert not (ro / "history.parquet").exists()
        assert len(rows(out)) == len(corpus_lines(sends=20))
        ino = out.stat().st_ino
        assert convert(ro / "history.jsonl").stat().st_ino == ino  # reused
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_bucket_files_hold_the_same_rows_however_they_are_grouped(tmp_path, small_chunks, monkeypatch):
    import kchaos.checkers.buckets as B

    hist = write_text(tmp_path, "".join(line + "\n" for line in corpus_lines(sends=300)))

    def layout(rows_per_group: int) -> dict[str, tuple[list[tuple], int]]:
        monkeypatch.setattr(B, "ROW_GROUP_ROWS", rows_per_group)
        parquet_path(hist).unlink(missing_ok=True)
        out = {}
        for f in sorted(B.bucket_dir(convert(hist)).glob("*.parquet")):
            table = pq.read_table(f)
            assert all(table.column(c).null_count == 0 for c in table.column_names), f.name
            out[f.name] = (table.to_pylist(), pq.ParquetFile(f).metadata.num_row_groups)
        return out

    whole, split = layout(1 << 30), layout(7)
    assert {name: rows for name, (rows, _) in whole.items()} == {name: rows for name, (rows, _) in split.items()}
    assert all(groups == 1 for _, groups in whole.values())
    assert max(groups for _, groups in split.values()) > 3
