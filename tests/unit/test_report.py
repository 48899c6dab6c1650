"""The per-run report (reports/run/report.py) and its plots (reports/run/plots.py).

Handmade run directories are built in tmp_path: a few sends to two
partitions, one kill window, a lost value, and an isr.jsonl with a failed
sample and a leader change. Recorded runs under tests/fixtures/runs, when
there are any, are reported on too (from a copy, so nothing is written there).
"""
from __future__ import annotations

import io
import json
import re
import shutil
import struct
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
from browser import render
from histories import write_registry_faults

from kchaos.checkers.verdict.judge import judge
from kchaos.core.faults import FaultCatalogue
from kchaos.reports.run import plots, read_plots
from kchaos.reports.run.report import REPORT_FILE, ReportError, load_run, write_report
from kchaos.reports.run.section import anomaly_marks

S = 1_000_000_000
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
TEST = {"name": "tiny", "seed": 7, "time_limit": 10.0,
        "topic": {"name": "kchaos", "partitions": 2, "replication_factor": 3, "min_insync": 2, "unclean": False},
        "producer": {"acks": "all", "idempotence": False, "retries": 5, "max_in_flight": 5},
        "cluster": {"nodes": 3, "controllers": 0, "kafka_version": "3.7.2", "storage": "plain"},
        "workload": {"producers": 2, "consumers": 1, "rate": 50.0},
        "nemesis": {"names": ["kill"], "interval": 3.0, "restart_delay": 2.0},
        "versions": {"kafka": "3.7.2"}, "argv": ["kchaos", "run", "--nemesis", "kill", "--seed", "7"]}
WINDOWS = [{"nemesis": "kill", "f": "kill", "start_s": 3.0, "end_s": 6.0, "first_epoch": 1, "last_epoch": 2,
            "targets": ["n1"], "applied": True}]
RESULTS = {
    "valid": False,
    "counts": {"acked": 9, "lost": 1, "unseen": 0, "acked_offset_mismatch": 1, "duplicate": 0,
               "inconsistent_offset": 1, "unexpected": 0, "failed_visible": 0, "poll_skip": 0,
               "nonmonotonic_poll": 0, "nonmonotonic_send": 0},
    "examples": {"lost": [106], "acked_offset_mismatch": [106], "inconsistent_offset": [[1, 2]]},
    "loss": {"acks": "all", "promised": True, "expected_by_configuration": False, "lost_in_promise": 1},
    "stats": {"send_invoke": 11, "send_ok": 9, "send_fail": 1, "send_info": 1,
              "partitions_complete": [0, 1], "partitions_incomplete": []},
    "latency_ms": {"send": {"ok": {"count": 9, "p50": 10.0, "p90": 20.0, "p99": 20.0, "max": 20.0}}},
    "timeline": {"windows": WINDOWS,
                 "availability": {"overall": {"invoked": 11, "ok": 9, "fail": 1, "info": 1, "ok_ratio": 0.8182},
                                  "outside_faults": {"invoked": 7, "ok": 7, "fail": 0, "info": 0, "ok_ratio": 1.0},
                                  "windows": [{**WINDOWS[0], "invoked": 4, "ok": 2, "fail": 1, "info": 1,
                                               "ok_ratio": 0.5}],
                                  "per_second": []},
                 "anomalies": {"lost": [{"key": 106, "acked_s": 5.51, "exposed_s": 9.0, "nemesis": [5]}],
                               "inconsistent_offset": [{"key": [1, 2], "acked_s": None, "exposed_s": 8.0,
                                                        "nemesis": []}]},
                 "events": []}}


def history() -> list[dict]:
    """11 sends (9 ok, 1 fail, 1 info) to partitions 0 and 1, a kill of n1 from 3 s to 6 s."""
    ops: list[dict] = []

    def op(t: float, process, type_: str, f: str, **kw) -> None:
        ops.append({"index": len(ops), "time": int(t * S), "process": process, "type": type_, "f": f, **kw})

    offsets = [0, 0]
    for i in range(11):
        t, p, v, proc = 1.0 + i * 0.75, i % 2, 100 + i, i % 2
        if i == 3:
            op(3.0, "nemesis", "invoke", "kill", nemesis="kill", target="one")
            op(3.1, "nemesis", "ok", "kill", nemesis="kill", targets=["n1"], nodes=["n1"])
        if i == 7:
            op(5.9, "nemesis", "invoke", "start", nemesis="kill")
            op(6.0, "nemesis", "ok", "start", nemesis="kill", nodes=["n1"])
        op(t, proc, "invoke", "send", topic="kchaos", partition=p, value=v)
        outcome = {4: "fail", 5: "info"}.get(i, "ok")
        extra = {"offset": offsets[p]} if outcome == "ok" else {"error": "boom"}
        offsets[p] += outcome == "ok"
        op(t + (0.02 if i % 3 else 0.01), proc, outcome, "send", topic="kchaos", partition=p, value=v, **extra)
    return ops


ISR = [{"time": 1 * S, "partition": 0, "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]},
       {"time": 1 * S, "partition": 1, "leader": 2, "replicas": [2, 3, 1], "isr": [2, 3, 1]},
       {"time": 2 * S, "error": "KafkaError{code=_TRANSPORT}"},
       {"time": 4 * S, "partition": 0, "leader": 2, "replicas": [1, 2, 3], "isr": [2, 3]},
       {"time": 4 * S, "partition": 1, "leader": 2, "replicas": [2, 3, 1], "isr": [2, 3]},
       {"time": 7 * S, "partition": 0, "leader": 2, "replicas": [1, 2, 3], "isr": [2, 3, 1]},
       {"time": 7 * S, "partition": 1, "leader": 2, "replicas": [2, 3, 1], "isr": [2, 3, 1]}]


def make_run(root: Path, *, results: bool = True, isr: bool = True, ops: list[dict] | None = None) -> Path:
    run = root / "tiny" / "20261122T000000.000Z"
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "nodes" / "n1" / "server.log").write_text("started\n")
    (run / "test.json").write_text(json.dumps(TEST))
    (run / "schedule.json").write_text("[]\n")
    ops = history() if ops is None else ops
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    write_registry_faults(run, ops)
    if results:
        (run / "results.json").write_text(json.dumps(RESULTS))
    if isr:
        (run / "isr.jsonl").write_text("".join(json.dumps(s) + "\n" for s in ISR))
    return run


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of PNG bytes; fails unless they are a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_plot(data: bytes) -> None:
    w, h = png_size(data)
    assert 1000 <= w <= 1200 and 250 <= h <= 1200, (w, h)
    assert len(data) > 10_000  # axes, labels and data, not a blank canvas


def row(text: str, *cells) -> bool:
    """Whether the rendered text has a table row starting with these cells (tab-separated)."""
    return re.search(r"^" + r"\t".join(re.escape(str(c)) for c in cells) + r"(\t|$)", text, re.M) is not None


# --- the report in a browser -------------------------------------------------------------------------------

def test_report_renders_clean_with_verdict_counts_and_plots(tmp_path):
    run = make_run(tmp_path)
    path = write_report(run)
    assert path == run / REPORT_FILE and path.is_file()
    page = render(path)
    page.assert_clean(min_images=7)
    assert len(page.images) == 7  # latency, its quantiles, throughput, offsets, unseen, realtime lag, ISR
    assert all(w >= 1000 for _, w, _ in page.images)
    assert page.title.startswith("kchaos: tiny")
    assert "Verdict: fail" in page.text and "20261122T000000.000Z" in page.text
    # promised (acks=all) and broken: results.json has no per-write classification, so the lost write is inside
    assert "1 acknowledged writes lost while an in-sync replica held them" in page.text
    assert "fails: 1 lost (inside Kafka's guarantee" in page.text
    for kind, n in RESULTS["counts"].items():
        if kind != "acked":
            assert row(page.text, kind, n), kind
    assert row(page.text, "lost", 1, "fail: 1 (inside Kafka's guarantee: an in-sync replica held them)", 106)
    # no write was lost outside the guarantee, so nothing the configuration allows explains a changed log
    assert row(page.text, "inconsistent_offset", 1, "fail: 1 (the log changed, and no write was lost outside "
               "Kafka's guarantee)", "[1, 2]")
    assert row(page.text, "overall", 11, 9, 1, 1, 0.8182)
    assert row(page.text, "in applied fault windows", 4, 2, 1, 1, 0.5)
    assert row(page.text, "ok", 9, 10.0, 20.0, 20.0, 20.0)
    assert row(page.text, 1, "\u25a0 kill", "kill", 3.0, 6.0, 3.0, "n1", "yes", "2 / 4")
    assert row(page.text, "min.insync.replicas", 2)
    assert row(page.text, "command line", "kchaos run --nemesis kill --seed 7")
    hrefs = {Path(unquote(urlparse(h).path)).relative_to(run.resolve()).as_posix() for h in page.links}
    assert {"history.jsonl", "results.json", "test.json", "schedule.json", "isr.jsonl",
            "nodes/n1/server.log"} <= hrefs
    assert all((run / h).is_file() for h in hrefs)


def test_report_without_results_or_isr(tmp_path):
    run = make_run(tmp_path, results=False, isr=False)
    page = render(write_report(run))
    page.assert_clean(min_images=6)
    assert len(page.images) == 6  # no ISR plot
    assert "Verdict: not checked" in page.text and "INVALID" not in page.text
    assert "No isr.jsonl in this run" in page.text
    # Windows, availability and latency come from the history itself.
    assert row(page.text, 1, "\u25a0 kill", "kill", 3.0, 6.0, 3.0, "n1", "yes", "2 / 4")
    assert row(page.text, "overall", 11, 9, 1, 1, 0.8182)
    assert row(page.text, "outside fault windows", 7, 7, 0, 0, 1.0)
    assert re.search(r"^ok\t9\t", page.text, re.M)


def test_load_run_computes_what_the_checker_would(tmp_path):
    """Without results.json, windows and availability match the handmade results (which agree with the checker)."""
    d = load_run(make_run(tmp_path, results=False))
    assert d.results is None and d.windows == WINDOWS
    assert d.availability["overall"] == RESULTS["timeline"]["availability"]["overall"]
    assert d.availability["outside_faults"] == RESULTS["timeline"]["availability"]["outside_faults"]
    assert len(d.section.data) == 11 and sorted(set(d.section.data.type)) == ["fail", "info", "ok"]
    assert d.latency["ok"]["count"] == 9 and d.latency["ok"]["max"] == pytest.approx(20.0)
    np.testing.assert_allclose(d.section.data.done_s - d.section.data.invoke_s, d.section.data.latency_ms / 1000)


def test_report_error_without_history_or_test(tmp_path):
    with pytest.raises(ReportError, match="no history.jsonl"):
        write_report(tmp_path)
    assert issubclass(ReportError, ValueError)
    run = make_run(tmp_path)
    (run / "test.json").unlink()
    with pytest.raises(ReportError, match="no test.json"):
        write_report(run)
    (run / "test.json").write_text("{not json")
    with pytest.raises(ReportError, match="test.json"):
        write_report(run)
    assert not (run / REPORT_FILE).exists()
    with pytest.raises(ReportError):
        write_report(tmp_path / "absent")


def test_malformed_history_is_still_reported(tmp_path):
    """A history the checker would reject (a garbage line, a truncated tail) still gets its plots."""
    run = make_run(tmp_path, results=False)
    lines = (run / "history.jsonl").read_text().splitlines(keepends=True)
    (run / "history.jsonl").write_text("".join(lines[:5]) + "garbage\n" + "".join(lines[5:]) + '{"index": 99, "ti')
    d = load_run(run)
    assert len(d.section.data) == 11 and d.windows == WINDOWS
    assert len(re.findall("<img ", write_report(run).read_text())) == 7


def test_empty_history_still_renders(tmp_path):
    run = make_run(tmp_path, results=False, isr=False, ops=[])
    page = render(write_report(run))
    page.assert_clean(min_images=3)
    assert "No faults were injected" in page.text and "not checked" in page.text


# --- the plots ---------------------------------------------------------------------------------------------

def test_fault_spans_are_the_windows_of_results():
    windows = RESULTS["timeline"]["windows"] + [
        {"nemesis": "partition-leader", "f": "start-partition", "start_s": 6.0, "end_s": None, "applied": True},
        {"nemesis": "pause:majority", "f": "pause", "start_s": 7.0, "end_s": 7.5, "applied": False},
        {"nemesis": "mystery", "f": "boom", "start_s": 8.0, "end_s": 8.2, "applied": True}]
    from kchaos.nemesis import PACKAGES, fault_kind
    catalogue = FaultCatalogue(tuple(fault_kind(s) for s in ("kill", "partition-leader", "pause:majority")))
    spans = plots.fault_spans(windows, end_s=12.0, catalogue=catalogue)
    assert [(s.start, s.end, s.label, s.applied, s.open) for s in spans] == [
        (3.0, 6.0, "kill", True, False), (6.0, 12.0, "partition-leader", True, True),
        (7.0, 7.5, "pause:majority", False, False), (8.0, 8.2, "mystery", True, False)]
    assert spans[0].color == PACKAGES["kill"].colors["kill"]
    assert spans[2].color == PACKAGES["pause"].colors["pause"]  # the family's colour, whatever the target
    assert spans[3].color == plots.nemesis_color("mystery") == plots.nemesis_color("mystery")
    assert plots.fault_spans([], 3.0) == []


def shaded_pixels(data: bytes, color: str) -> int:
    """Pixels of a PNG plot in `color` shaded over white as fault windows are (alpha 0.18)."""
    import matplotlib.colors as mcolors
    import matplotlib.image as mpimg
    img = mpimg.imread(io.BytesIO(data))[..., :3]
    want = 1 - 0.18 * (1 - np.array(mcolors.to_rgb(color)))
    return int((np.abs(img - want).max(axis=-1) < 0.03).sum())


def test_fault_windows_are_drawn(tmp_path):
    """Each plot is shaded in the nemesis's colour where its window is, and only then."""
    d = load_run(make_run(tmp_path))
    c = d.faults
    kill = plots.nemesis_color("kill", c)
    width = plots.WIDTH * 100 * (6.0 - 3.0) / 10  # the window's share of a ~10 s x axis, in pixels
    for draw in (lambda w: plots.latency_png(d.section.data, w, catalogue=c),
                 lambda w: plots.throughput_png(d.section.data, w, catalogue=c),
                 lambda w: plots.offsets_png(d.section.data, w, catalogue=c),
                 lambda w: plots.isr_png(d.isr, w, catalogue=c)):
        with_w, without = draw(d.windows), draw([])
        assert_plot(with_w)
        assert shaded_pixels(without, kill) == 0
        assert shaded_pixels(with_w, kill) > width * 100  # a band across the plot's height


def test_plots_are_pngs(tmp_path):
    d = load_run(make_run(tmp_path))
    marks = plots.Marks(lost=[106])
    for data in (plots.latency_png(d.section.data, d.windows), plots.throughput_png(d.section.data, d.windows),
                 plots.offsets_png(d.section.data, d.windows, marks), plots.isr_png(d.isr, d.windows, 2)):
        assert_plot(data)


def test_empty_inputs_give_plots_not_errors():
    empty = plots.Sends.empty()
    for data in (plots.latency_png(empty), plots.throughput_png(empty), plots.offsets_png(empty),
                 plots.offsets_png(empty, WINDOWS, plots.Marks(lost=[1], inconsistent=[(0, 1)])),
                 plots.isr_png([]), plots.isr_png([{"time": S, "error": "x"}], WINDOWS, 2),
                 plots.latency_png(empty, [{"nemesis": "kill", "start_s": 1.0, "end_s": None}])):
        w, h = png_size(data)
        assert w >= 1000 and h >= 250


def test_lost_and_mismatched_values_are_marked(tmp_path):
    d = load_run(make_run(tmp_path))
    t, p, o = plots.offset_marks(d.section.data, anomaly_marks(RESULTS))["lost"]
    assert (t.tolist(), p.tolist(), o.tolist()) == ([pytest.approx(5.51)], [0], [2])  # value 106's ack
    marks = plots.Marks(lost=[106, 999], mismatch=[107], inconsistent=[(1, 2), (0, 9)], exposed_s={(0, 9): 8.0})
    placed = plots.offset_marks(d.section.data, marks)
    s = d.section.data
    sent = {int(v): (float(t), int(p), int(o))
            for v, t, p, o, k in zip(s.value, s.done_s, s.partition, s.offset, s.type) if k == "ok"}
    assert list(zip(*[a.tolist() for a in placed["lost"]])) == [sent[106]]  # 999 was never acknowledged
    assert list(zip(*[a.tolist() for a in placed["acked_offset_mismatch"]])) == [sent[107]]
    at_1_2 = [v for v, (_, p, o) in sent.items() if (p, o) == (1, 2)]
    assert sorted(zip(*[a.tolist() for a in placed["inconsistent_offset"]])) == sorted(
        [sent[v] for v in at_1_2] + [(8.0, 0, 9)])
    assert plots.offset_marks(d.section.data, plots.Marks())["lost"][0].size == 0


def test_lost_marks_show_in_the_plot(tmp_path):
    """Red crosses: the offsets plot has more of the lost colour with lost values than without."""
    d = load_run(make_run(tmp_path))
    import matplotlib.image as mpimg
    red = np.array([0xd6, 0x27, 0x28]) / 255

    def reds(marks: plots.Marks) -> int:
        img = mpimg.imread(io.BytesIO(plots.offsets_png(d.section.data, [], marks)))[..., :3]
        return int((np.abs(img - red).max(axis=-1) < 0.08).sum())

    values = [int(v) for v, k in zip(d.section.data.value, d.section.data.type) if k == "ok"]
    assert reds(plots.Marks(lost=values, counts={"lost": 0})) > reds(plots.Marks(counts={"lost": 0})) + 50


def test_isr_series_gaps_and_leader_changes():
    series, errors = plots.isr_series(ISR + [{"time": 9 * S, "partition": 0, "leader": -1, "replicas": [1, 2, 3],
                                              "isr": [3]}, {"nonsense": True}])
    assert errors == [2.0] and sorted(series) == [0, 1]
    s = series[0]
    assert s.time_s.tolist() == [1.0, 2.0, 4.0, 7.0, 9.0]
    assert np.isnan(s.isr[1]) and np.isnan(s.replicas[1])
    assert s.isr[[0, 2, 3, 4]].tolist() == [3, 2, 3, 1]
    assert s.leader_changes == [(4.0, 2, 2), (9.0, 1, -1)]
    assert series[1].leader_changes == []


def test_subsampling_is_bounded_deterministic_and_keeps_outliers():
    idx = plots._subsample(1_000_000, 1000, keep=np.array([7, 999_999, 123_457]))
    assert len(idx) <= 1003 and {7, 123_457, 999_999} <= set(idx.tolist())
    assert np.array_equal(idx, plots._subsample(1_000_000, 1000, keep=np.array([7, 999_999, 123_457])))
    assert np.array_equal(plots._subsample(5, 1000), np.arange(5))


def test_report_of_a_large_history_is_fast(tmp_path):
    """100k history lines: the report takes well under 5 s of CPU (conversion to Parquet included)."""
    rng = np.random.default_rng(3)
    n = 50_000  # sends, each an invocation and its completion
    t = np.cumsum(rng.integers(100_000, 400_000, n))
    lat = rng.lognormal(14, 1, n).astype(np.int64)
    run = make_run(tmp_path, results=False, ops=[])
    last: dict[int, int] = {}
    with open(run / "history.jsonl", "w") as fh:
        for i in range(n):  # sequential per process: invoke, ok, invoke, ok...
            p = i % 8
            start = max(int(t[i]), last.get(p, 0) + 1)
            last[p] = start + int(lat[i])
            base = {"process": p, "f": "send", "topic": "kchaos", "partition": i % 3, "value": i}
            fh.write(json.dumps({"index": 2 * i, "time": start, "type": "invoke", **base}) + "\n")
            fh.write(json.dumps({"index": 2 * i + 1, "time": last[p], "type": "ok", "offset": i // 3, **base}) + "\n")
    plots.latency_png(plots.Sends.empty())  # matplotlib's first figure loads fonts: not the report's cost
    cpu = time.process_time()
    write_report(run)
    assert time.process_time() - cpu < 5.0


# --- recorded runs -----------------------------------------------------------------------------------------

RECORDED = sorted(p.parent for p in FIXTURES.glob("**/history.jsonl")) if FIXTURES.is_dir() else []


@pytest.mark.skipif(not RECORDED, reason="no recorded runs under tests/fixtures/runs")
@pytest.mark.parametrize("recorded", RECORDED, ids=[str(p.relative_to(FIXTURES)) for p in RECORDED])
def test_recorded_run(recorded, tmp_path):
    run = tmp_path / recorded.name
    shutil.copytree(recorded, run, symlinks=True)
    page = render(write_report(run))
    isr = (run / "isr.jsonl").is_file()
    page.assert_clean(min_images=4 if isr else 3)
    if not isr:
        assert "No isr.jsonl in this run" in page.text
    if not (run / "results.json").is_file():
        assert "Verdict: not checked" in page.text
        return
    results = json.loads((run / "results.json").read_text())
    # recorded before verdicts: judged from the counts and test.json, as compare and serve judge them
    label = judge(results, json.loads((run / "test.json").read_text())).verdict
    assert f"Verdict: {label}" in page.text and label == "pass"  # acks=1 loss and idempotence-off duplicates pass
    for kind, n in results["counts"].items():
        if kind != "acked":
            assert row(page.text, kind, n), kind
    for i, w in enumerate((results.get("timeline") or {}).get("windows") or []):
        assert re.search(rf"^{i + 1}\t[^\t]*{re.escape(w['nemesis'])}\t{w['f']}\t{w['start_s']}\t{w['end_s']}\t",
                         page.text, re.M), w
    # Every lost value of results.json was acknowledged, so each is marked on the offsets plot.
    anomalies = (results.get("timeline") or {}).get("anomalies") or {}
    lost = {a["key"] for a in anomalies.get("lost") or []} | set((results.get("examples") or {}).get("lost") or [])
    d = load_run(run)
    assert len(plots.offset_marks(d.section.data, anomaly_marks(results))["lost"][0]) == len(lost)


# --- plots taken from the report being rewritten -----------------------------------------------------------

def _plots_drawn(monkeypatch) -> list[str]:
    """The names of the run plots drawn from now on (`finish` renders each one's PNG)."""
    drawn: list[str] = []
    real = plots.finish

    def counting(fig, *args, **kwargs):
        drawn.append(fig.axes[0].get_title() or fig.axes[0].get_ylabel())
        return real(fig, *args, **kwargs)
    for module in (plots, read_plots):
        monkeypatch.setattr(module, "finish", counting)
    return drawn


def test_a_rewritten_report_takes_unchanged_plots_from_the_old_page_and_is_the_same_page(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    results = json.loads((run / "results.json").read_text())
    results["send_errors"] = {"boom": {"fail": 1, "info": 1}}  # so that every plot drawn is on the page
    (run / "results.json").write_text(json.dumps(results))
    drawn = _plots_drawn(monkeypatch)
    fresh = write_report(run).read_bytes()
    assert len(drawn) >= 4 and len(re.findall(rb'data-key="[0-9a-f]{40}"', fresh)) == len(drawn)
    drawn.clear()
    assert write_report(run).read_bytes() == fresh and drawn == []
    # What the offsets plot marks changed: that plot, and only it, is drawn again.
    results["examples"]["lost"] = [106, 108]
    (run / "results.json").write_text(json.dumps(results))
    page = write_report(run).read_bytes()
    assert drawn == ["p0 offset"]
    # A plot damaged in the page is drawn again; a page that is not a report holds none.
    (run / REPORT_FILE).write_bytes(page.replace(b"base64,iVBOR", b"base64,!!!", 1))
    drawn.clear()
    assert write_report(run).read_bytes() == page and len(drawn) == 1
    (run / REPORT_FILE).write_text("not a report")
    drawn.clear()
    assert write_report(run).read_bytes() == page and len(drawn) == len(re.findall(rb"data-key=", page))


def test_a_plots_key_is_its_function_and_arguments_in_any_process():
    from types import MappingProxyType

    from kchaos.reports.run.png_cache import cached

    calls = []

    @cached
    def draw(xs, names, meta):
        calls.append(1)
        return b"png"

    a = draw(np.arange(5), {"b", "a", "c"}, MappingProxyType({"k": 1}))
    b = draw(np.arange(5), {"c", "b", "a"}, MappingProxyType({"k": 1}))
    assert a == b"png" and a.key is not None and a.key == b.key
    assert draw(np.arange(6), {"a"}, {}).key != a.key
    assert draw(lambda: 0, set(), {}).key is None  # not picklable: drawn every time, never reused
    assert len(calls) == 4


def test_plots_drawn_ahead_of_the_check_are_not_drawn_again_unless_the_results_change_them(tmp_path, monkeypatch):
    """A run's process draws the report's plots beside its check (`predraw`, before results.json is written), then
    writes the page: only the plots that the results change are drawn then."""
    from kchaos.reports.run.report import predraw

    run = make_run(tmp_path)
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").unlink()
    drawn = _plots_drawn(monkeypatch)
    predraw(run)
    ahead = list(drawn)
    assert len(ahead) >= 4
    drawn.clear()
    (run / "results.json").write_text(json.dumps(results))
    page = write_report(run).read_bytes()
    assert set(drawn) < set(ahead), "every plot was drawn again"
    # The same page as one drawn from nothing, in a process that drew nothing ahead.
    from kchaos.reports.run import png_cache
    monkeypatch.setattr(png_cache, "_DRAWN", type(png_cache._DRAWN)())
    (run / REPORT_FILE).unlink()
    assert write_report(run).read_bytes() == page


def test_predraw_never_raises(tmp_path):
    from kchaos.reports.run.report import predraw
    predraw(tmp_path / "no-such-run")
