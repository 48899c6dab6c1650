"""checkers/queue/timeline.py on handmade nemesis histories: windows, availability, anomaly context."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kchaos import nemesis
from kchaos.checkers.queue.timeline import _open_at, _Window, anomaly_timelines, availability, fault_windows, timelines
from kchaos.core.faults import FaultCatalogue

S = 1_000_000_000
# What the runner's faults.json would say of the nemeses these histories name ("mystery" is none of them).
FAULTS = FaultCatalogue(tuple(nemesis.fault_kind(s) for s in (
    "partition-leader", "kill:one", "pause:leader", "slow-follower", "kill", "power-fail-all", "rolling-restart")))


def hist(*lines):
    """Nemesis lines from (seconds, type, f, nemesis[, detail]); the i-th line has epoch i and index 100 + 10 i."""
    return [{"index": 100 + 10 * i, "time": int(t * S), "type": typ, "f": f, "nemesis": nem, "epoch": i,
             "detail": rest[0] if rest else {}}
            for i, (t, typ, f, nem, *rest) in enumerate(lines)]


def epochs(n):
    """Sends per epoch 0..n-1: epoch e invoked 2**e, ok 2**e - 1 (except e=0), one info from e=1, no fail."""
    return [{"epoch": e, "invoked": 2 ** e, "ok": max(2 ** e - 1, 1) if e else 1, "fail": 0, "info": int(e > 0)}
            for e in range(n)]


PAIR = hist(
    (1.0, "invoke", "start-partition", "partition-leader"),               # 0, index 100
    (1.5, "ok", "start-partition", "partition-leader", {"targets": ["n3"]}),  # 1, index 110
    (5.0, "invoke", "stop-partition", "partition-leader"),                # 2, index 120
    (5.2, "ok", "stop-partition", "partition-leader", {"nodes": ["n3"]}),  # 3, index 130
)


def test_start_stop_pair_is_one_window():
    assert fault_windows(PAIR, FAULTS) == [{"nemesis": "partition-leader", "f": "start-partition", "start_s": 1.0,
                                    "end_s": 5.2, "first_epoch": 1, "last_epoch": 3, "targets": ["n3"],
                                    "applied": True}]


def test_stacked_starts_close_at_one_stop():
    ev = hist((1, "invoke", "kill", "kill:one"), (1.1, "ok", "kill", "kill:one", {"targets": ["n1"]}),
              (2, "invoke", "kill", "kill:one"), (2.1, "ok", "kill", "kill:one", {"targets": ["n2"]}),
              (3, "invoke", "start", "kill:one"), (3.5, "ok", "start", "kill:one"))
    ws = fault_windows(ev, FAULTS)
    assert [(w["first_epoch"], w["last_epoch"], w["start_s"], w["end_s"], w["targets"]) for w in ws] == [
        (1, 5, 1.0, 3.5, ["n1"]), (3, 5, 2.0, 3.5, ["n2"])]


def test_heal_of_same_spec_closes_open_window_and_interleaving_pairs():
    ev = hist((1, "invoke", "pause", "pause:leader"),
              (1.2, "invoke", "start-slow", "slow-follower"),      # interleaves with pause's op
              (1.3, "ok", "pause", "pause:leader", {"targets": ["n2"]}),
              (1.4, "ok", "start-slow", "slow-follower", {"targets": ["n1"]}),
              (9, "invoke", "heal", "slow-follower"), (9.1, "ok", "heal", "slow-follower"),
              (9.2, "invoke", "heal", "pause:leader"), (9.4, "ok", "heal", "pause:leader"))
    by = {w["nemesis"]: w for w in fault_windows(ev, FAULTS)}
    assert (by["pause:leader"]["end_s"], by["pause:leader"]["last_epoch"], by["pause:leader"]["targets"]) == (
        9.4, 7, ["n2"])
    assert (by["slow-follower"]["end_s"], by["slow-follower"]["last_epoch"], by["slow-follower"]["targets"]) == (
        9.1, 5, ["n1"])


def test_window_never_closed_runs_to_the_last_epoch():
    ev = hist((0.5, "invoke", "start", "kill"), (0.6, "ok", "start", "kill"),   # a stop with nothing open
              (2, "invoke", "power-fail", "power-fail-all"), (2.5, "ok", "power-fail", "power-fail-all"))
    [w] = fault_windows(ev, FAULTS)
    assert (w["f"], w["first_epoch"], w["last_epoch"], w["end_s"]) == ("power-fail", 3, None, None)
    av = availability([w], epochs(7), [])
    assert av["windows"][0]["invoked"] == sum(2 ** e for e in range(3, 7))
    assert av["outside_faults"]["invoked"] == 1 + 2 + 4


def test_skipped_fault_is_kept_but_not_applied_and_not_excluded():
    ev = hist((1, "invoke", "start-partition", "partition-leader"),
              (1.1, "info", "start-partition", "partition-leader", {"error": "no leader"}),
              (5, "invoke", "stop-partition", "partition-leader"), (5.1, "ok", "stop-partition", "partition-leader"))
    ws = fault_windows(ev, FAULTS)
    assert [(w["applied"], w["targets"], w["first_epoch"], w["last_epoch"]) for w in ws] == [(False, None, 1, 3)]
    av = availability(ws, epochs(5), [])
    assert av["outside_faults"] == av["overall"]
    assert av["windows"][0]["invoked"] == 2 + 4 + 8


def test_single_f_and_unknown_ops_are_their_own_span():
    ev = hist((1, "invoke", "roll", "rolling-restart"), (2, "invoke", "zap", "mystery"),
              (2.5, "ok", "zap", "mystery", {"targets": ["n1"]}), (8, "ok", "roll", "rolling-restart"),
              (9, "invoke", "roll", None))
    ws = fault_windows(ev, FAULTS)
    assert [(w["nemesis"], w["f"], w["start_s"], w["end_s"], w["first_epoch"], w["last_epoch"], w["applied"])
            for w in ws] == [("rolling-restart", "roll", 1.0, 8.0, 1, 3, True),
                             ("mystery", "zap", 2.0, 2.5, 2, 2, True),
                             (None, "roll", 9.0, None, 5, None, False)]
    assert ws[1]["targets"] == ["n1"]


def test_availability_sums_exactly_the_window_epochs_and_outside():
    ws = fault_windows(PAIR, FAULTS)   # epochs 1..3
    pe = epochs(6)
    ps = [{"second": 0, "invoked": 4, "ok": 3, "fail": 1, "info": 0, "p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0},
          {"second": 1, "invoked": 0, "ok": 0, "fail": 0, "info": 0, "p50": None, "p90": None, "p99": None,
           "max": None}]
    av = availability(ws, list(reversed(pe)), ps)
    w = av["windows"][0]
    assert w["targets"] == ["n3"] and w["first_epoch"] == 1
    assert (w["invoked"], w["ok"], w["fail"], w["info"]) == (2 + 4 + 8, 1 + 3 + 7, 0, 3)
    assert w["ok_ratio"] == round(11 / 14, 4)
    out = av["outside_faults"]
    assert (out["invoked"], out["ok"], out["info"]) == (1 + 16 + 32, 1 + 15 + 31, 2)
    assert av["overall"]["invoked"] == 63 and av["overall"]["ok_ratio"] == round(58 / 63, 4)
    assert [r["ok_ratio"] for r in av["per_second"]] == [0.75, None]
    assert av["per_second"][0]["p99"] == 3.0


def test_overlapping_applied_windows_exclude_each_epoch_once():
    ws = [{"first_epoch": 1, "last_epoch": 2, "applied": True}, {"first_epoch": 2, "last_epoch": 3, "applied": True},
          {"first_epoch": 5, "last_epoch": 5, "applied": False}]
    av = availability(ws, epochs(6), [])
    assert av["outside_faults"]["invoked"] == 1 + 16 + 32
    assert [w["invoked"] for w in av["windows"]] == [6, 12, 32]
    assert availability([], [], [])["overall"] == {"invoked": 0, "ok": 0, "fail": 0, "info": 0, "ok_ratio": None}


def test_anomaly_acked_in_open_fault_gets_its_start():
    res = anomaly_timelines({"lost": [{"key": 7, "acked_ns": 3 * S, "exposed_ns": None},
                                      {"key": 8, "acked_ns": 6 * S, "exposed_ns": None}]}, PAIR, faults=FAULTS)
    assert [a["nemesis"] for a in res["lost"]] == [[110], []]
    assert res["lost"][0]["acked_s"] == 3.0 and res["lost"][0]["exposed_s"] is None
    assert res["events"] == [{"index": 110, "time_s": 1.5, "type": "ok", "f": "start-partition",
                              "nemesis": "partition-leader", "targets": ["n3"]}]


def test_events_between_ack_and_exposure_are_listed():
    res = anomaly_timelines({"duplicate": [{"key": [0, 4], "acked_ns": 4 * S, "exposed_ns": 5 * S},
                                           {"key": [0, 5], "acked_ns": int(0.5 * S), "exposed_ns": 5 * S}]},
                            PAIR, faults=FAULTS)
    assert res["duplicate"][0]["nemesis"] == [110, 120]  # open start, then the stop's invoke (5.0 <= exposure)
    assert res["duplicate"][1]["nemesis"] == [100, 110, 120]
    assert [e["index"] for e in res["events"]] == [100, 110, 120]


def test_limit_events_keeps_the_most_recent():
    ev = hist(*[(t, typ, f, "kill") for t in range(1, 5) for typ, f in
                (("invoke", "kill"), ("ok", "kill"), ("invoke", "start"), ("ok", "start"))])
    a = {"lost": [{"key": 1, "acked_ns": 0, "exposed_ns": 10 * S}]}
    assert anomaly_timelines(a, ev, limit_events=3, faults=FAULTS)["lost"][0]["nemesis"] == [230, 240, 250]
    res = anomaly_timelines(a, ev, limit_events=0, faults=FAULTS)
    assert res["lost"][0]["nemesis"] == [] and res["events"] == []


def test_unacked_anomaly_uses_exposure_time():
    res = anomaly_timelines({"poll_skip": [{"key": 3, "acked_ns": None, "exposed_ns": 2 * S},
                                           {"key": 4, "acked_ns": None, "exposed_ns": int(0.5 * S)},
                                           {"key": 5, "acked_ns": None, "exposed_ns": None}]}, PAIR, faults=FAULTS)
    assert [a["nemesis"] for a in res["poll_skip"]] == [[110], [], []]


def test_kind_named_events_is_rejected():
    with pytest.raises(ValueError):
        anomaly_timelines({"events": []}, PAIR, faults=FAULTS)


def test_timelines_is_json_serialisable():
    out = timelines(PAIR, epochs(4), [{"second": 0, "invoked": 2, "ok": 1, "fail": 0, "info": 1, "p50": None,
                                       "p90": None, "p99": None, "max": None}],
                    {"lost": [{"key": (1, 2), "acked_ns": 2 * S, "exposed_ns": 6 * S}], "unseen": []}, FAULTS)
    assert set(out) == {"windows", "availability", "anomalies", "events"}
    back = json.loads(json.dumps(out))
    assert back["anomalies"] == {"lost": [{"key": [1, 2], "acked_s": 2.0, "exposed_s": 6.0,
                                           "nemesis": [110, 120, 130]}], "unseen": []}
    assert [e["index"] for e in back["events"]] == [110, 120, 130]
    assert back["availability"]["windows"][0]["invoked"] == 2 + 4 + 8


@given(st.lists(st.tuples(st.integers(0, 50), st.one_of(st.none(), st.integers(-5, 50)), st.booleans()),
                max_size=40),
       st.lists(st.integers(-5, 110), max_size=30), st.integers(0, 6))
def test_open_windows_at_a_time_are_those_whose_span_holds_it(spans, times, keep):
    # The sweep against the definition: a window is open at t when start <= t <= end (end None: open on).
    windows = [_Window("n", "start", start, i, 0, True, end_ns=None if end is None else start + end,
                       done=(start + 1, i) if completed else None)
               for i, (start, end, completed) in enumerate(spans)]
    got = _open_at(windows, times, keep)
    for t in times:
        held = sorted(w.done for w in windows if w.done is not None and w.start_ns <= t
                      and (w.end_ns is None or (w.start_ns <= w.end_ns and t <= w.end_ns)))
        assert got[t] == (tuple(held[-keep:]) if keep else ())
