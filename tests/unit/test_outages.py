"""Availability as time: outages, the acknowledged share of a run's span, and the time to the next
acknowledgement after each fault."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kchaos.checkers.outages import OUTAGE_GAP_S, outages, outages_text


def test_a_fault_that_stops_writes_for_four_seconds_is_one_outage_and_writes_return_half_a_second_after_the_heal():
    acks = [i / 10 for i in range(51)] + [9 + i / 10 for i in range(31)]  # 0.0-5.0 s, then 9.0-12.0 s
    windows = [{"nemesis": "kill-leader", "f": "kill", "start_s": 4.8, "end_s": 8.5, "applied": True},
               {"nemesis": "kill-leader", "f": "kill", "start_s": 10.0, "end_s": None, "applied": False}]
    out = outages(acks, 0.0, 12.0, windows)
    assert out["stretches"] == [{"start_s": 5.0, "end_s": 9.0, "seconds": 4.0}]
    assert out["longest_s"] == out["total_s"] == 4.0 and out["count"] == 1
    assert out["acked_share"] == pytest.approx(1 - 4 / 12, abs=1e-4)
    assert out["faults"] == [{"nemesis": "kill-leader", "f": "kill", "start_s": 4.8, "end_s": 8.5,
                              "ack_after_start_s": 0.0, "ack_after_end_s": 0.5}]


def test_writes_that_never_came_back_run_the_outage_to_the_last_send_and_leave_no_next_acknowledgement():
    out = outages([0.5, 1.0], 0.0, 10.0, [{"nemesis": "pause", "f": "pause", "start_s": 2.0, "end_s": 6.0,
                                            "applied": True}])
    assert out["stretches"] == [{"start_s": 1.0, "end_s": 10.0, "seconds": 9.0}]
    assert out["faults"][0]["ack_after_start_s"] is None and out["faults"][0]["ack_after_end_s"] is None


def test_a_run_that_sent_nothing_has_no_span_and_no_share():
    out = outages([], None, None, [])
    assert out["acked_share"] is None and out["stretches"] == [] and out["longest_s"] == 0.0


@given(st.lists(st.floats(0, 100, allow_nan=False), max_size=60), st.floats(0, 100), st.floats(0, 50))
def test_outages_cover_exactly_the_gaps_of_a_second_or_more(acks, first, length):
    last = first + length
    acks = sorted(a for a in acks if a >= first)  # every acknowledgement comes after its send
    out = outages(acks, first, last, [])
    start = acks[0] if acks else first  # the span starts with the first acknowledgement
    end = max(start, last)
    inside = [start, *(a for a in acks if start <= a <= end), end]
    gaps = [b - a for a, b in zip(inside, inside[1:])]
    assert out["count"] == sum(g >= OUTAGE_GAP_S for g in gaps)
    assert out["total_s"] == pytest.approx(sum(g for g in gaps if g >= OUTAGE_GAP_S), abs=0.01 * (out["count"] + 1))
    assert 0 <= out["longest_s"] <= out["total_s"] + 0.01 <= end - start + 0.02
    assert all(s["seconds"] >= OUTAGE_GAP_S - 0.005 for s in out["stretches"])
    if end > start:
        assert 0 <= out["acked_share"] <= 1


def test_the_span_starts_at_the_first_acknowledgement_unless_a_fault_came_first():
    acks = [3.0, 3.5, 4.0]  # a client's bootstrap: its first send waited 3 s, no outage
    assert outages(acks, 0.0, 4.0, [])["count"] == 0
    fault = {"nemesis": "pause", "f": "pause", "start_s": 0.5, "end_s": 2.5, "applied": True}
    out = outages(acks, 0.0, 4.0, [fault])  # a fault before any acknowledgement: its outage counts
    assert out["stretches"] == [{"start_s": 0.5, "end_s": 3.0, "seconds": 2.5}]
    assert outages(acks, 0.0, 10.0, [])["stretches"] == [{"start_s": 4.0, "end_s": 10.0, "seconds": 6.0}]


def test_the_line_says_the_share_the_longest_outage_and_the_time_to_the_next_acknowledgement_after_a_heal():
    acks = [i / 10 for i in range(51)] + [9 + i / 10 for i in range(31)]
    windows = [{"nemesis": "kill-leader", "f": "kill", "start_s": 4.8, "end_s": 8.5, "applied": True}]
    assert outages_text(outages(acks, 0.0, 12.0, windows)) == (
        "writes acknowledged 66.7% of the 12 s; 1 outage, the longest 4 s (5 s to 9 s); "
        "after a heal the next acknowledgement came in 0.5 s")
    assert outages_text(outages([1.0, 1.5], 1.0, 1.5, [])) == \
        "writes acknowledged throughout the 0.5 s (never 1 s or more without one)"
    assert outages_text(outages([], None, None, [])) is None
