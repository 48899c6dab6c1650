"""History recording: appended, flushed as it happens, readable after a kill."""
import json
import os
import threading

import pytest
from manual_clock import ClockedChild, ManualClock

from kchaos.core.history import FLUSH_S, History, HistoryError, read_history


def test_index_time_and_fields(tmp_path):
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        op = h.invoke(0, "send", topic="t", partition=1, value=7)
        h.complete(op, "ok", offset=3)
        h.invoke("nemesis", "kill", partition=0)
    recs = list(read_history(path))
    assert [r["index"] for r in recs] == [0, 1, 2]
    assert recs[1] == {**recs[1], "process": 0, "type": "ok", "f": "send", "topic": "t",
                       "partition": 1, "value": 7, "offset": 3}
    assert recs[0]["time"] <= recs[1]["time"] <= recs[2]["time"]
    assert recs[2]["process"] == "nemesis"


def test_each_line_reaches_the_os_within_the_flush_interval(tmp_path):
    path = tmp_path / "history.jsonl"
    clock = ManualClock()
    h = History(path, wait=clock.wait)
    h.invoke(1, "poll")
    clock.advance(FLUSH_S / 2)
    assert path.read_text() == ""  # buffered till the flusher's next pass
    clock.advance(FLUSH_S / 2)
    # Another reader sees it, while the history is still open: flushed by the background thread.
    assert json.loads(path.read_text().splitlines()[0])["f"] == "poll"
    h.close()


def test_concurrent_appends_keep_indices_dense(tmp_path):
    path = tmp_path / "history.jsonl"
    h = History(path)

    def worker(p):
        for _ in range(200):
            h.complete(h.invoke(p, "send", value=p), "ok", offset=0)

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.close()
    recs = list(read_history(path))
    assert [r["index"] for r in recs] == list(range(3200))
    by_process = {}
    for r in recs:  # invoke and completion alternate per process
        by_process.setdefault(r["process"], []).append(r["type"])
    assert all(ts == ["invoke", "ok"] * 200 for ts in by_process.values())


def test_killed_writer_leaves_readable_history(tmp_path):
    path = tmp_path / "history.jsonl"
    code = ("import os; from kchaos.core.history import History\n"
            f"h = History({str(path)!r}, wait=wait)\n"
            "i = 0\n"
            "while True:\n"
            "    h.invoke(0, 'send', value=i); i += 1\n"
            "    if i == 50: os.write(1, b'ready\\n')\n")
    child = ClockedChild(code, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    try:
        child.ready()
        child.tick()  # the first 50 lines are older than the flush interval
    finally:
        child.kill()  # in the middle of appending
    recs = list(read_history(path))
    assert len(recs) >= 50
    assert [r["value"] for r in recs] == list(range(len(recs)))


def test_truncated_last_line_is_tolerated_but_not_a_middle_one(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"process":0,"type":"invoke","f":"send"}\n{"index":1,"proc')
    assert len(list(read_history(path))) == 1
    path.write_text('{"index":0,"process":0,"type":"invoke","f":"send"}\nnot json\n'
                    '{"index":2,"process":0,"type":"ok","f":"send"}\n')
    with pytest.raises(HistoryError, match=":2: not JSON"):
        list(read_history(path))


def test_unknown_type_names_the_line(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"process":0,"type":"maybe","f":"send"}\n')
    with pytest.raises(HistoryError, match=":1: unknown type 'maybe'"):
        list(read_history(path))
