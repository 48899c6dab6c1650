"""Per-process send streams: recorded on the history's clock, crash-safe, merged into one ordered history."""
import os
from pathlib import Path

from manual_clock import ClockedChild

from kchaos.core.history import History, read_history
from kchaos.core.send_stream import PARTS_DIR, SendStream, iter_stream, merge_streams

REPO = Path(__file__).resolve().parents[2]


def _stream(run: Path, name: str, t0: int) -> SendStream:
    (run / PARTS_DIR).mkdir(exist_ok=True)
    return SendStream(run / PARTS_DIR / f"{name}.arrows", topic="kchaos", t0_ns=t0)


def test_merge_interleaves_by_time_and_renumbers(tmp_path):
    h = History(tmp_path / "history.jsonl")
    a, b = _stream(tmp_path, "a", h.t0_ns), _stream(tmp_path, "b", h.t0_ns)
    a.sent(0, 0, 1, 1)
    h.complete(h.invoke(9, "poll", topic="kchaos"), "ok", records=[])
    b.sent(2, 1, 0, 2)
    b.done(2, 1, 0, 2, "info", None, "no delivery report")
    a.done(0, 0, 1, 1, "ok", 7, None)
    a.sent(1, 0, 2, 3)
    a.done(1, 0, 2, 3, "fail", None, 'produce: "quoted"')
    for s in (a, b):
        s.close()
    h.close()
    assert merge_streams(tmp_path) == 8
    recs = list(read_history(tmp_path / "history.jsonl"))
    assert [r["index"] for r in recs] == list(range(8))
    assert [r["time"] for r in recs] == sorted(r["time"] for r in recs)
    assert [(r["process"], r["type"]) for r in recs] == [
        (0, "invoke"), (9, "invoke"), (9, "ok"), (2, "invoke"), (2, "info"), (0, "ok"), (1, "invoke"), (1, "fail")]
    ok = recs[5]
    assert ok == {**ok, "f": "send", "topic": "kchaos", "partition": 1, "value": 1, "offset": 7, "producer": 0}
    assert "offset" not in recs[4] and recs[4]["error"] == "no delivery report"
    assert recs[7]["error"] == 'produce: "quoted"'
    assert not (tmp_path / PARTS_DIR).exists()
    assert merge_streams(tmp_path) == 0  # nothing left to merge: the history stays as it is
    assert len(list(read_history(tmp_path / "history.jsonl"))) == 8


def test_killed_writer_leaves_every_batch_it_flushed_readable(tmp_path):
    path = tmp_path / "p.arrows"
    code = ("import os, time; from kchaos.core.send_stream import SendStream\n"
            f"s = SendStream({str(path)!r}, topic='t', t0_ns=time.monotonic_ns(), wait=wait)\n"
            "i = 0\n"
            "while True:\n"
            "    s.sent(0, 0, 0, i); i += 1\n"
            "    if i == 1000: os.write(1, b'ready\\n')\n")
    child = ClockedChild(code, cwd=REPO)
    try:
        child.ready()
        child.tick()  # a batch with the first 1000 sends, at least, is in the file
        for _ in range(20):  # then kill the writer mid-stream, while it writes more batches
            child.tick(wait=False)
    finally:
        child.kill()
    topic, batches = iter_stream(path)
    values = [v for b in batches for v in b.column("value").to_pylist()]
    assert topic == "t"
    assert len(values) >= 1000
    assert values == list(range(len(values)))


def test_a_merge_cut_short_is_finished_without_doubling(tmp_path):
    h = History(tmp_path / "history.jsonl")
    s = _stream(tmp_path, "a", h.t0_ns)
    s.sent(0, 0, 0, 1)
    s.done(0, 0, 0, 1, "ok", 0, None)
    s.close()
    h.complete(h.invoke(5, "poll"), "ok", records=[[0, 0, 1]])
    h.close()
    merge_streams(tmp_path)
    merged = (tmp_path / "history.jsonl").read_text()
    # As if killed between moving the parts aside and renaming the merged file into place.
    (tmp_path / "history.jsonl.merging").write_text(merged)
    (tmp_path / "history.jsonl").write_text("stale\n")
    (tmp_path / (PARTS_DIR + ".merged")).mkdir()
    merge_streams(tmp_path)
    assert (tmp_path / "history.jsonl").read_text() == merged
    assert sorted(os.listdir(tmp_path)) == ["history.jsonl"]
    assert len(merged.splitlines()) == 4


def test_a_part_of_lines_is_merged_by_time_and_its_torn_last_line_dropped(tmp_path):
    """The Java client's queue clients write their part as history lines without an index, each starting with
    `{"time":`; a killed JVM leaves a torn last line, which the merge drops."""
    h = History(tmp_path / "history.jsonl")
    h.complete(h.invoke(9, "poll", topic="kchaos"), "ok", records=[])
    h.close()
    first = next(read_history(tmp_path / "history.jsonl"))["time"]
    (tmp_path / PARTS_DIR).mkdir()
    (tmp_path / PARTS_DIR / "java-clients.jsonl").write_text(
        f'{{"time":{first - 1},"process":0,"type":"invoke","f":"send","topic":"kchaos","partition":2,"value":1,'
        '"producer":0}\n'
        f'{{"time":{first + 10**9},"process":0,"type":"ok","f":"send","topic":"kchaos","partition":2,"value":1,'
        '"producer":0,"offset":4}\n'
        f'{{"time":{first + 2 * 10**9},"process":1,"type":"inv')
    assert merge_streams(tmp_path) == 4
    recs = list(read_history(tmp_path / "history.jsonl"))
    assert [(r["index"], r["process"], r["type"]) for r in recs] == [
        (0, 0, "invoke"), (1, 9, "invoke"), (2, 9, "ok"), (3, 0, "ok")]
    assert recs[3] == {**recs[3], "f": "send", "partition": 2, "value": 1, "offset": 4, "producer": 0}
    assert not (tmp_path / PARTS_DIR).exists()
