"""The fine print of docs/checkers.md's txn definitions, each as a tiny labelled history: which partitions make a
transaction torn, a cut-off transaction's partitions, a polled value the final read lacks, the sends a send
check pairs (null offsets, other partitions, failed transactions), where a duplicate is counted, and which reads
make an info transaction's sends part of the version order. test_txn_spark.py runs the Spark checker on the same
histories."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_txn_checker import RC, RU, H, found

TOPIC2 = {**RC, "topic": {"partitions": 2}}


def cut_off(h: H, process: int, sends: list[tuple[int, int]]) -> H:
    """An invocation of (key, value) sends that never completes."""
    return h.add(process=process, type="invoke", f="txn", value=[["send", k, v] for k, v in sends])


# name -> (history, test.json, the non-zero counts, examples of some kinds)
Case = tuple[H, dict, dict[str, int], dict[str, list[Any]]]
CASES: dict[str, Callable[[], Case]] = {
    # torn_transaction: only the partitions of the values no read_committed reader returned must be complete
    "torn when the missing value's partition completed": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 0), (1, 11, 1, None)])
        .drain(0, [[0, 0, 10]], complete=False).drain(1, []), RC, {"torn_transaction": 1}, {"torn_transaction": [0]}),
    "not torn when only the shown value's partition completed": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 0), (1, 11, 1, None)])
        .drain(0, [[0, 0, 10]]).drain(1, [], complete=False), RC, {}, {}),
    "a read_uncommitted poll shows nothing": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 0), (1, 11, 1, None)]).txn(1, "ok", polls=[[[0, 0, 10]]])
        .drain(0, [], complete=False).drain(1, []), RU, {}, {}),
    # a transaction the run cut off: its sends' partitions are their keys mod test.json's partition count
    "a cut-off transaction is torn": lambda: (
        cut_off(H().drain(0, [[0, 0, 10]]).drain(1, []), 1, [(2, 10), (3, 11)]),
        TOPIC2, {"torn_transaction": 1}, {"torn_transaction": [4]}),
    "without a partition count a cut-off transaction is in no partition": lambda: (
        cut_off(H().drain(0, [[0, 0, 10]]).drain(1, []), 1, [(2, 10), (3, 11)]), RC, {}, {}),
    "a cut-off transaction of which nothing was read is not torn": lambda: (
        cut_off(H().drain(0, []).drain(1, []), 1, [(2, 10), (3, 11)]), TOPIC2, {}, {}),
    # lost_write's second rule: a committed value a poll returned that the complete final read lacks
    "a polled value missing from the complete final read is lost": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(1, "ok", polls=[[[0, 0, 10]]]).drain(0, []),
        RC, {"lost_write": 1}, {"lost_write": [10]}),
    "so it is under read_uncommitted, and when a failed transaction polled it": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(1, "fail", polls=[[[0, 0, 10]]]).drain(0, []),
        RU, {"lost_write": 1}, {"lost_write": [10]}),
    "a polled value is not lost while its partition's final read is incomplete": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(1, "ok", polls=[[[0, 0, 10]]]).drain(0, [], complete=False),
        RC, {}, {}),
    "an info transaction's polled value is not lost": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 0)]).txn(1, "ok", polls=[[[0, 0, 10]]]).drain(0, []), RC, {}, {}),
    "both lost_write rules, and unseen at the highest read offset": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(0, "ok", sends=[(0, 11, 0, 1)])
        .txn(0, "ok", sends=[(0, 12, 0, 2)]).txn(0, "ok", sends=[(0, 13, 0, 3)])
        .txn(1, "ok", polls=[[[0, 0, 10]]]).drain(0, [[0, 2, 12], [0, 3, 99]]),
        RC, {"lost_write": 2, "unseen": 1, "inconsistent_offsets": 1},
        {"lost_write": [10, 11], "unseen": [13], "inconsistent_offsets": [[0, 3]]}),
    # nonmonotonic_send: against the process's previous ok or info transaction that sent to the partition with an
    # offset; null offsets and failed transactions are passed over
    "nonmonotonic_send skips transactions that sent elsewhere": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 5)]).txn(0, "ok", sends=[(1, 11, 1, 0)])
        .txn(0, "ok", sends=[(0, 12, 0, 3)]).drain(0, [[0, 3, 12], [0, 5, 10]]).drain(1, [[1, 0, 11]]),
        RC, {"nonmonotonic_send": 1}, {"nonmonotonic_send": [[0, 0, 5, 3]]}),
    "nonmonotonic_send passes over null offsets": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 5)]).txn(0, "info", sends=[(0, 11, 0, None)])
        .txn(0, "info", sends=[(0, 12, 0, None), (0, 13, 0, 3)]).drain(0, [[0, 3, 13], [0, 4, 12], [0, 5, 10]]),
        RC, {"nonmonotonic_send": 1}, {"nonmonotonic_send": [[0, 0, 5, 3]]}),
    "a failed transaction's sends are not compared": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 5)]).txn(0, "fail", sends=[(0, 11, 0, 1)])
        .txn(0, "ok", sends=[(0, 12, 0, 6)]).drain(0, [[0, 5, 10], [0, 6, 12]]), RC, {}, {}),
    # int_send_skip and int_nonmonotonic_send: consecutive sends with an offset of one ok or info transaction
    "int_nonmonotonic_send across a null offset": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 1), (0, 11, 0, None), (0, 12, 0, 0)])
        .drain(0, [[0, 0, 12], [0, 1, 10], [0, 2, 11]]),
        RC, {"int_nonmonotonic_send": 1}, {"int_nonmonotonic_send": [[0, 0, 1, 0]]}),
    "int_send_skip across a null offset whose record a read shows between": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 0), (0, 11, 0, None), (0, 12, 0, 2)])
        .drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]]),
        RC, {"int_send_skip": 1}, {"int_send_skip": [[0, 0, 0, 2]]}),
    "a failed transaction's sends are not paired": lambda: (
        H().txn(0, "fail", sends=[(0, 10, 0, 1), (0, 11, 0, 0)]).drain(0, []), RC, {}, {}),
    # duplicate: every read of the value, and its send's offset
    "a value read where its send did not land is a duplicate": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 0)]).drain(0, [[0, 1, 10]]), RC, {"duplicate": 1}, {"duplicate": [10]}),
    "an info transaction's send offset counts too": lambda: (
        H().txn(0, "info", sends=[(0, 10, 0, 0)]).drain(0, [[0, 1, 10]]), RC, {"duplicate": 1}, {"duplicate": [10]}),
    "a failed transaction's polls count": lambda: (
        H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(1, "fail", polls=[[[0, 0, 10], [0, 1, 10]]])
        .drain(0, [[0, 0, 10]]), RC, {"duplicate": 1}, {"duplicate": [10]}),
    # an info transaction's sends enter the version order once any read (here a failed transaction's poll)
    # returned one of its values: offset 1 of partition 1 is then known, and process 2 skipped it
    "an info transaction read by a failed transaction's poll": lambda: (
        info_read_by_a_failed_poll(True), RC, {"poll_skip": 1, "torn_transaction": 1},
        {"poll_skip": [[2, 1, 0, 2]], "torn_transaction": [4]}),
    "the same info transaction, unread": lambda: (info_read_by_a_failed_poll(False), RC, {}, {}),
    # G1a: an aborted value a read_committed poll returned, whatever that poll's own transaction did
    "G1a by a poll of a failed transaction": lambda: (
        H().txn(0, "fail", sends=[(0, 10, 0, 0)]).txn(1, "fail", polls=[[[0, 0, 10]]]).drain(0, []),
        RC, {"G1a": 1}, {"G1a": [10]}),
}


def info_read_by_a_failed_poll(read: bool) -> H:
    h = H().txn(0, "ok", sends=[(0, 20, 1, 0)]).txn(0, "ok", sends=[(1, 21, 1, 2)])
    h.txn(1, "info", sends=[(0, 10, 0, 0), (1, 11, 1, 1)])
    if read:
        h.txn(3, "fail", polls=[[[0, 0, 10]]])
    h.txn(2, "ok", polls=[[[1, 0, 20]]]).txn(2, "ok", polls=[[[1, 2, 21]]])
    return h.drain(0, [], complete=False).drain(1, [[1, 0, 20], [1, 2, 21]])


@pytest.mark.parametrize("name", CASES)
def test_the_reference_follows_each_definition(name):
    h, test, counts, examples = CASES[name]()
    r = h.check(test)
    assert found(r) == counts
    for kind, keys in examples.items():
        assert r["examples"][kind] == keys


def test_a_failing_kind_fails_the_verdict_and_a_polled_loss_is_decided():
    h, test, _, _ = CASES["a polled value missing from the complete final read is lost"]()
    r = h.check(test)
    assert r["valid"] is False and r["unseen_undecided"] == 0
    h, test, _, _ = CASES["a polled value is not lost while its partition's final read is incomplete"]()
    assert h.check(test)["valid"] is True  # read, so not unseen: nothing is undecided
