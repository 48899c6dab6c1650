"""The reference checker against the labelled corpus, the docs' tiny examples and the naive model.

Pure Python (no Spark): every example is a generated history checked in memory.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from corpora.queue import ANOMALIES, PLANTS, generate, write, write_large
from histories import (
    SEND,
    HistoryBuilder,
    add_random_sends,
    drop_impossible_loss,
    hostable_plants,
    idempotent_test,
    model,
    run_shapes,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers.queue.reference import COUNTS, check_reference
from kchaos.core.history import read_history

ZERO = dict.fromkeys(COUNTS, 0)
NEW_KINDS = ("poll_skip", "nonmonotonic_poll", "nonmonotonic_send")


def found(result: dict[str, Any], kind: str) -> set[Any]:
    """Every key of `kind` in a check_reference result made with max_examples=None."""
    return {tuple(k) if isinstance(k, list) else k for k in result["examples"].get(kind, [])}


def acked(ops: list[dict[str, Any]]) -> int:
    return len({o["value"] for o in ops if o["f"] == "send" and o["type"] == "ok"})


def assert_finds_exactly(ops: list[dict[str, Any]], test: dict[str, Any],
                         planted: dict[str, set[Any]]) -> dict[str, Any]:
    r = check_reference(ops, test, max_examples=None)
    for kind in ANOMALIES:
        assert found(r, kind) == planted[kind], kind
    assert r["counts"] == {**{k: len(planted[k]) for k in ANOMALIES}, "acked": acked(ops)}
    return r


@st.composite
def shapes(draw: st.DrawFn, planting: bool = True) -> dict[str, Any]:
    """generate() arguments for a random run shape, with plants only where the shape can host them."""
    kw = draw(run_shapes(sends=300, partitions=4, producers=4, consumers=3, empty_partitions=2))
    allowed = hostable_plants(kw, planting)
    plant = draw(st.dictionaries(st.sampled_from(sorted(allowed)), st.integers(0, 3))) if allowed else {}
    return {**kw, "plant": drop_impossible_loss(kw, plant)}


# --- the corpus --------------------------------------------------------------------------

@settings(max_examples=150, deadline=None, database=None)
@given(shape=shapes())
def test_finds_exactly_the_planted_anomalies(shape):
    c = generate(**shape)
    for kind, n in shape["plant"].items():
        if kind in ANOMALIES and kind != "unseen":
            assert len(c.planted[kind]) >= n, kind
    assert_finds_exactly(c.ops, c.test, c.planted)


@settings(max_examples=80, deadline=None, database=None)
@given(shape=shapes(planting=False), idempotent=st.booleans())
def test_clean_histories_have_nothing_but_unseen(shape, idempotent):
    c = generate(**shape, idempotent=idempotent)
    r = assert_finds_exactly(c.ops, c.test, c.planted)
    assert all(not c.planted[k] for k in ANOMALIES if k != "unseen")
    assert bool(c.planted["unseen"]) <= (not shape["drain_complete"])
    assert r["valid"] == ("unknown" if c.planted["unseen"] else True)
    assert r["stats"]["malformed_client_ops"] == r["stats"]["malformed_records"] == 0


def test_corpus_is_deterministic_and_realistic():
    plant = dict.fromkeys(PLANTS, 2)
    a = generate(7, sends=200, plant=plant, empty_partitions=1)
    assert a == generate(7, sends=200, plant=plant, empty_partitions=1)
    assert a != generate(8, sends=200, plant=plant, empty_partitions=1)
    assert [o["index"] for o in a.ops] == list(range(len(a.ops)))
    assert all(x["time"] < y["time"] for x, y in zip(a.ops, a.ops[1:]))
    types = {(o["type"], o["f"]) for o in a.ops if o["process"] != "nemesis"}
    assert {("info", "send"), ("fail", "send"), ("ok", "assign"), ("ok", "poll"),
            ("ok", "drain"), ("info", "drain")} <= types
    assert any(o["process"] == "nemesis" for o in a.ops)
    outstanding: dict[int, str] = {}
    for o in a.ops:  # one op outstanding per process, completions pair with invocations
        if o["process"] != "nemesis":
            if o["type"] == "invoke":
                assert o["process"] not in outstanding
                outstanding[o["process"]] = o["f"]
            else:
                assert outstanding.pop(o["process"]) == o["f"]
    assert not outstanding
    assert a.test["topic"]["partitions"] == 4
    assert {len(a.planted[k]) for k in ANOMALIES if k not in ("lost", "unseen")} == {2}


def test_generate_rejects_plants_the_shape_cannot_host():
    with pytest.raises(ValueError, match="need a consumer"):
        generate(1, sends=10, consumers=0, plant={"poll_skip": 1})
    with pytest.raises(ValueError, match="acks=0"):
        generate(1, sends=10, acks="0", plant={"nonmonotonic_send": 1})
    with pytest.raises(ValueError, match="completes"):
        generate(1, sends=10, drain_complete=False, plant={"lost": 1})
    with pytest.raises(ValueError, match="unknown plant"):
        generate(1, sends=10, plant={"lots": 1})


def test_written_corpus_reads_back(tmp_path):
    c = generate(3, sends=100, plant={"duplicate": 1, "poll_skip": 1})
    run = write(c, tmp_path / "run")
    assert json.loads((run / "test.json").read_text()) == c.test
    assert list(read_history(run / "history.jsonl")) == c.ops


def test_write_large_streams_a_labelled_history(tmp_path):
    big = write_large(tmp_path, seed=5, ops=6000, per_kind=2)
    ops = list(read_history(big.path))
    assert len(ops) == big.lines and 4000 < big.lines < 8000
    assert len(big.planted["lost"]) == 4 and len(big.planted["poll_skip"]) == 2
    assert_finds_exactly(ops, big.test, big.planted)


# --- verdict rules -------------------------------------------------------------------------

def configured(c: Any, **overrides: Any) -> dict[str, Any]:
    test = json.loads(json.dumps(c.test))
    for key, value in overrides.items():
        section, name = key.split("__")
        test[section][name] = value
    return test


@pytest.mark.parametrize("kind", ["duplicate", "nonmonotonic_send"])
def test_reordering_and_duplicates_are_invalid_only_with_idempotence(kind):
    c = generate(11, sends=150, plant={kind: 1})
    assert check_reference(c.ops, configured(c, producer__idempotence=False))["valid"] is True
    assert check_reference(c.ops, configured(c, producer__idempotence=True))["valid"] is False


@pytest.mark.parametrize("kind", ["unexpected", "poll_skip", "nonmonotonic_poll", "inconsistent_offset",
                                  "acked_offset_mismatch"])
def test_other_anomalies_are_invalid_whatever_the_configuration(kind):
    c = generate(12, sends=150, plant={kind: 1})
    assert check_reference(c.ops, configured(c, producer__acks="1"))["valid"] is False


@pytest.mark.parametrize("overrides, promised", [
    ({}, True),
    ({"producer__acks": "-1"}, True),
    ({"topic__min_insync": 3}, True),
    ({"producer__acks": "1"}, False),
    ({"producer__acks": "0"}, False),
    ({"topic__min_insync": 1}, True),  # Kafka's guarantee does not depend on min.insync
    ({"topic__unclean": True}, False),
])
def test_loss_is_invalid_and_a_broken_promise_only_where_promised(overrides, promised):
    c = generate(13, sends=150, plant={"lost": 1})
    r = check_reference(c.ops, configured(c, **overrides))
    assert r["valid"] is False and r["counts"]["lost"] == 1
    acks = overrides.get("producer__acks", "all")
    assert r["loss"] == {"acks": acks, "promised": promised, "expected_by_configuration": not promised}


def test_no_loss_expects_nothing_and_missing_settings_are_the_harness_defaults():
    c = generate(14, sends=100)
    r = check_reference(c.ops, configured(c, producer__acks="1"))
    assert (r["valid"], r["loss"]) == (True, {"acks": "1", "promised": False,
                                               "expected_by_configuration": False})
    assert check_reference(c.ops, {})["loss"] == {"acks": "all", "promised": True,
                                                  "expected_by_configuration": False}
    dup = generate(14, sends=100, plant={"duplicate": 1})
    assert check_reference(dup.ops, None)["valid"] is True  # idempotence off by default


# --- the tiny examples of docs/checkers.md ---------------------------------------------------

def sends_0_1_2() -> HistoryBuilder:
    """send 1 → 0/0, send 2 → 0/1, send 3 → 0/2, a complete drain reading all three; consumer 4 assigns."""
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1).send(0, 3, 0, offset=2)
    h.drain(6, 0, [(0, 0, 1), (0, 1, 2), (0, 2, 3)])
    return assign(h, 4)


def assign(h: HistoryBuilder, process: int) -> HistoryBuilder:
    h.op(process, "invoke", "assign", partitions=[0])
    h.op(process, "ok", "assign", partitions=[0])
    return h


def check(h: HistoryBuilder, test: dict[str, Any] | None = None) -> dict[str, Any]:
    return check_reference(h.ops, test or {}, max_examples=None)


def test_example_lost_by_read_bound():
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1).send(0, 3, 0, outcome="info")
    h.poll(4, [(0, 0, 1)]).drain(5, 0, [(0, 2, 3)], complete=False)
    r = check(h)
    assert r["counts"] == {**ZERO, "acked": 2, "lost": 1}
    assert r["examples"]["lost"] == [2] and r["valid"] is False
    # Without the read at offset 2 nothing shows that offset 1 was passed: unseen.
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1)
    h.poll(4, [(0, 0, 1)]).drain(5, 0, [], complete=False)
    assert check(h)["counts"] == {**ZERO, "acked": 2, "unseen": 1}


def test_a_read_at_the_acked_offset_itself_is_no_read_bound():
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 7, 0, outcome="info")
    h.drain(5, 0, [(0, 0, 7)], complete=False)
    assert check(h)["counts"] == {**ZERO, "acked": 1, "acked_offset_mismatch": 1, "unseen": 1}


def test_example_poll_skip():
    r = check(sends_0_1_2().poll(4, [(0, 0, 1)]).poll(4, [(0, 2, 3)]))
    assert r["counts"] == {**ZERO, "acked": 3, "poll_skip": 1}
    assert r["examples"]["poll_skip"] == [[4, 0, 0, 2]] and r["valid"] is False
    # Nothing shows that offset 1 exists: not a skip.
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 3, 0, offset=2)
    assert check(h.poll(4, [(0, 0, 1)]).poll(4, [(0, 2, 3)]))["counts"] == {**ZERO, "acked": 2}
    # Without the drain nobody read value 2, past which the consumer went: lost too.
    h = HistoryBuilder().send(0, 1, 0, offset=0).send(0, 2, 0, offset=1).send(0, 3, 0, offset=2)
    r = check(h.poll(4, [(0, 0, 1)]).poll(4, [(0, 2, 3)]))
    assert r["counts"] == {**ZERO, "acked": 3, "poll_skip": 1, "lost": 1}


def test_example_nonmonotonic_poll():
    polls = [[(0, 0, 1), (0, 1, 2)], [(0, 1, 2), (0, 2, 3)]]
    h = sends_0_1_2().poll(4, polls[0]).poll(4, polls[1])
    r = check(h)
    assert r["counts"] == {**ZERO, "acked": 3, "nonmonotonic_poll": 1}
    assert r["examples"]["nonmonotonic_poll"] == [[4, 0, 1, 1]] and r["valid"] is False
    within = check(sends_0_1_2().poll(4, [(0, 1, 2), (0, 0, 1)]))
    assert within["examples"] == {"acked": [1, 2, 3], "nonmonotonic_poll": [[4, 0, 1, 0]]}


@pytest.mark.parametrize("reset", ["assign", "info poll"])
def test_a_reset_between_polls_ends_the_stream(reset):
    h = sends_0_1_2().poll(4, [(0, 0, 1), (0, 1, 2)])
    if reset == "assign":
        assign(h, 4)
    else:
        h.poll(4, [], outcome="info")
    h.poll(4, [(0, 0, 1), (0, 1, 2), (0, 2, 3)]).poll(5, [(0, 2, 3)])
    assert check(h)["counts"] == {**ZERO, "acked": 3}


def test_streams_are_per_process_and_partition():
    h = sends_0_1_2().send(1, 10, 1, offset=0).send(1, 11, 1, offset=1)
    h.poll(4, [(0, 0, 1), (1, 0, 10)]).poll(5, [(0, 2, 3)]).poll(4, [(1, 1, 11), (0, 1, 2)])
    assert check(h)["counts"] == {**ZERO, "acked": 5}


def test_example_nonmonotonic_send():
    # Process 0 sends 1 → 0/5, then 2 → 0/3; sends of process 1 and to partition 1 do not compare.
    h = HistoryBuilder().send(0, 1, 0, offset=5).send(1, 9, 0, offset=4).send(0, 2, 0, offset=3)
    h.send(0, 3, 1, offset=0).send(0, 4, 0, offset=6)
    h.drain(5, 0, [(0, 3, 2), (0, 4, 9), (0, 5, 1), (0, 6, 4)]).drain(5, 1, [(1, 0, 3)])
    r = check(h, idempotent_test(True))
    assert r["counts"] == {**ZERO, "acked": 5, "nonmonotonic_send": 1}
    assert r["examples"]["nonmonotonic_send"] == [2] and r["valid"] is False
    assert check(h, idempotent_test(False))["valid"] is True
    # The same offset twice is not monotonic either.
    h = HistoryBuilder().send(0, 1, 0, offset=2).send(0, 2, 0, offset=2)
    assert check(h)["examples"]["nonmonotonic_send"] == [2]


def test_nemesis_ops_and_unknown_fields_are_ignored_and_malformed_ops_counted():
    h = sends_0_1_2()
    h.nemesis("kill", value={"x": 1}, partition=[["n1"]], offset=1.5, records="x", complete="yes")
    h.op("nemesis", "ok", "poll", records=[[0, 7, 99]])
    h.op(4, "invoke", "poll", mood="curious")
    h.op(4, "ok", "poll", records=[[0, 0, 1]], mood="calm")
    r = check(h)
    assert (r["valid"], r["counts"], r["stats"]["nemesis_ops"]) == (True, {**ZERO, "acked": 3}, 3)
    h.op(7, "ok", "drain", partition=0, records=[[0, 0], [0, 1, True]], complete=True)
    h.op(8, "ok", "send", partition=0, value=3, offset="three")
    r = check(h)
    assert r["valid"] == "unknown"
    assert (r["stats"]["malformed_records"], r["stats"]["malformed_client_ops"]) == (2, 1)


# --- the existing counts agree with the naive model of tests/unit/histories.py ----------------



@settings(max_examples=200, deadline=None, database=None)
@given(sends=st.lists(SEND, min_size=1, max_size=20), strays=st.lists(st.integers(0, 4), max_size=2),
       complete=st.tuples(st.booleans(), st.booleans()), idempotent=st.booleans())
def test_agrees_with_model(sends, strays, complete, idempotent):
    h = HistoryBuilder()
    polled = add_random_sends(h, sends, strays)
    h.poll(5, polled[::2])
    for p in (0, 1):
        h.drain(6, p, [r for r in polled[1::2] if r[0] == p], complete=complete[p])
    valid, expected = model(h.ops, idempotent)
    r = check_reference(h.ops, idempotent_test(idempotent))
    # The model knows only the drain-based rule; the read bound turns some of its unseen into lost.
    done = {p for p in (0, 1) if complete[p]}
    read = {v for *_, v in polled}
    rb_only = {v for v, (outcome, p, o, _) in enumerate(sends) if outcome == "ok" and p not in done
               and v not in read and any(q == p and f > o for q, f, _ in polled)}
    expected["lost"] += len(rb_only)
    expected["unseen"] -= len(rb_only)
    assert {k: r["counts"][k] for k in expected} == expected
    if not rb_only and not any(r["counts"][k] for k in NEW_KINDS):
        assert r["valid"] == valid


def test_nonmonotonic_send_is_judged_per_producer_instance():
    # Processes 0 and 1 are two in-flight slots of producer 7: 1 is invoked first, 2 after it,
    # 2 is acked first at a lower offset. Without `producer` each process is its own producer.
    def history(producer: int | None) -> HistoryBuilder:
        via = {} if producer is None else {"producer": producer}
        h = HistoryBuilder()
        h.op(0, "invoke", "send", topic="t", partition=0, value=1, **via)
        h.op(1, "invoke", "send", topic="t", partition=0, value=2, **via)
        h.op(1, "ok", "send", topic="t", partition=0, value=2, offset=3)  # producer inherited
        h.op(0, "ok", "send", topic="t", partition=0, value=1, offset=4, **via)
        return h.drain(5, 0, [(0, 3, 2), (0, 4, 1)])

    shared = check(history(7), idempotent_test(True))
    assert shared["counts"] == {**ZERO, "acked": 2, "nonmonotonic_send": 1}
    assert shared["examples"]["nonmonotonic_send"] == [2] and shared["valid"] is False
    assert check(history(None), idempotent_test(True))["valid"] is True
    # Acked in invocation order through one instance, whatever the completion order: fine.
    h = HistoryBuilder()
    h.op(0, "invoke", "send", topic="t", partition=0, value=1, producer=7)
    h.op(1, "invoke", "send", topic="t", partition=0, value=2, producer=7)
    h.op(1, "ok", "send", topic="t", partition=0, value=2, offset=4, producer=7)
    h.op(0, "ok", "send", topic="t", partition=0, value=1, offset=3, producer=7)
    assert check(h.drain(5, 0, [(0, 3, 1), (0, 4, 2)]), idempotent_test(True))["valid"] is True


@settings(max_examples=40, deadline=None, database=None)
@given(seed=st.integers(0, 2**31), in_flight=st.integers(2, 4), planted=st.integers(0, 3),
       idempotent=st.booleans())
def test_in_flight_corpus_is_labelled_exactly(seed, in_flight, planted, idempotent):
    c = generate(seed, sends=300, in_flight=in_flight, idempotent=idempotent,
                 plant={"nonmonotonic_send": planted, "duplicate": 1, "lost": 1})
    sends = [o for o in c.ops if o["f"] == "send"]
    assert all(o["producer"] == o["process"] // in_flight for o in sends)
    # Slots of one instance overlap: some instance has two sends outstanding at once.
    outstanding, overlapped = {}, False
    for o in sends:
        mine = outstanding.setdefault(o["producer"], set())
        if o["type"] == "invoke":
            overlapped |= bool(mine)
            mine.add(o["process"])
        else:
            mine.discard(o["process"])
    assert overlapped
    assert len(c.planted["nonmonotonic_send"]) == planted
    assert_finds_exactly(c.ops, c.test, c.planted)
