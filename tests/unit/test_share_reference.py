"""The share checker's reference on tiny labelled histories: each kind found where it is planted and nowhere
else, the allowed redeliveries counted by cause, and an incomplete final drain making the run unknown."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.checkers.share.reference import CAUSES, SHARE_KINDS, check_share_ops

LIMIT, LOCK_MS = 3, 1000
MS = 1_000_000


class History:
    """A share history written op by op, each op 10 ms after the one before."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def _op(self, **op: Any) -> dict[str, Any]:
        op = {"index": len(self.ops), "time": len(self.ops) * 10 * MS, **op}
        self.ops.append(op)
        return op

    def send(self, value: int, partition: int = 0, offset: int | None = None) -> History:
        self._op(process=100, type="invoke", f="send", partition=partition, value=value)
        self._op(process=100, type="ok", f="send", partition=partition, value=value,
                 offset=value if offset is None else offset)
        return self

    def poll(self, process: int, *records: tuple[int, int, int, int], gap_ms: int = 0) -> History:
        """`records`: (partition, offset, value, delivery count). `gap_ms` more between invoke and ok."""
        self._op(process=process, type="invoke", f="share-poll")
        if gap_ms:
            self.ops[-1]["time"] -= gap_ms * MS
        self._op(process=process, type="ok", f="share-poll", records=[list(r) for r in records])
        return self

    def ack(self, process: int, *acks: tuple[int, int, str, str], type_: str = "ok") -> History:
        """`acks`: (partition, offset, accept|release|reject, ok|fail|info)."""
        self._op(process=process, type="invoke", f="share-ack", acks=[list(a[:3]) for a in acks])
        self._op(process=process, type=type_, f="share-ack", acks=[list(a) for a in acks])
        return self

    def leave(self, process: int, crashed: bool = False) -> History:
        self._op(process=process, type="invoke", f="share-leave")
        self._op(process=process, type="info" if crashed else "ok", f="share-leave")
        return self

    def state(self, **partitions: tuple[int, int]) -> History:
        """`partitions`: p0=(start, end); the lag is what lies between them."""
        self._op(process=200, type="ok", f="share-state",
                 partitions={k.lstrip("p"): {"start": a, "end": b, "lag": b - a} for k, (a, b) in partitions.items()})
        return self

    def check(self) -> dict[str, Any]:
        return check_share_ops(self.ops, LIMIT, LOCK_MS)


def kinds(result: dict[str, Any]) -> dict[str, int]:
    return {k: n for k, n in result["counts"].items() if k in SHARE_KINDS and n}


def test_a_clean_history_is_valid_and_counts_its_redeliveries_by_cause():
    h = (History().send(1).send(2).send(3)
         .poll(0, (0, 1, 1, 1), (0, 2, 2, 1)).ack(0, (0, 1, "accept", "ok"), (0, 2, "release", "ok"))
         .poll(1, (0, 2, 2, 2), (0, 3, 3, 1)).ack(1, (0, 2, "accept", "ok"), (0, 3, "accept", "ok"))
         .state(p0=(4, 4)))
    r = h.check()
    assert r["valid"] is True and kinds(r) == {}
    assert r["counts"]["acked"] == 3 and r["counts"]["delivered"] == 3
    assert r["redeliveries"] == {"release": 1, "failed_accept": 0, "crash": 0, "lock_timeout": 0}


def test_each_second_counts_deliveries_acknowledgements_and_redeliveries_and_anomalies_are_marked_in_time():
    h = (History().send(1).send(2)
         .poll(0, (0, 1, 1, 1), (0, 2, 2, 1)).ack(0, (0, 1, "release", "ok"), (0, 2, "accept", "ok")))
    for op in h.ops[-4:]:
        op["time"] += 2_000 * MS  # the first delivery and its acknowledgements in second 2
    h.poll(1, (0, 1, 1, 1)).ack(1, (0, 1, "reject", "ok"))
    for op in h.ops[-4:]:
        op["time"] += 5_000 * MS  # the redelivery, whose count did not rise, in second 5
    r = h.state(p0=(3, 3)).check()
    assert r["per_second"] == [
        {"second": 2, "delivered": 2, "accept": 1, "release": 1, "reject": 0,
         "redelivered": {"release": 0, "failed_accept": 0, "crash": 0, "lock_timeout": 0}},
        {"second": 5, "delivered": 1, "accept": 0, "release": 0, "reject": 1,
         "redelivered": {"release": 1, "failed_accept": 0, "crash": 0, "lock_timeout": 0}}]
    assert list(r["marks"]) == ["delivery_count_regressed"] and 5 <= r["marks"]["delivery_count_regressed"][0] < 6


def test_an_acknowledged_record_never_delivered_is_lost_once_the_drain_completed():
    h = History().send(1).send(2).poll(0, (0, 1, 1, 1)).ack(0, (0, 1, "accept", "ok")).state(p0=(3, 3))
    r = h.check()
    assert r["valid"] is False and kinds(r) == {"share_lost": 1}
    assert r["examples"]["share_lost"] == [[0, 2, 2]]


def test_an_incomplete_drain_or_a_crashed_member_leaves_the_record_unseen_not_lost():
    r = History().send(1).send(2).poll(0, (0, 1, 1, 1)).state(p0=(2, 3)).check()
    assert r["valid"] == "unknown" and kinds(r) == {} and r["counts"]["unseen"] == 1
    # A start offset behind records already acknowledged, with no lag, is a drained partition (as Kafka 4.4 reports).
    h = History().send(1).send(2).poll(0, (0, 1, 1, 1)).ack(0, (0, 1, "accept", "ok"))
    h._op(process=200, type="ok", f="share-state", partitions={"0": {"start": 1, "end": 3, "lag": 0}})
    assert kinds(h.check()) == {"share_lost": 1}
    r = History().send(1).send(2).poll(0, (0, 1, 1, 1)).leave(0, crashed=True).state(p0=(3, 3)).check()
    assert r["valid"] == "unknown" and kinds(r) == {} and r["counts"]["unseen"] == 1


@pytest.mark.parametrize("kind, outcome, found", [
    ("accept", "ok", {"redelivered_after_accept": 1}),
    ("reject", "ok", {"redelivered_after_reject": 1}),
    ("accept", "fail", {}),  # refused: the record was never accepted
    ("accept", "info", {}),  # unknown: it may not have been
    ("release", "ok", {}),
])
def test_a_record_delivered_again_after_a_committed_accept_or_reject(kind, outcome, found):
    h = (History().send(1).poll(0, (0, 1, 1, 1)).ack(0, (0, 1, kind, outcome))
         .poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2)))
    r = h.check()
    assert kinds(r) == found
    assert r["counts"]["redelivered"] == (0 if found else 1)  # a wrongful redelivery is not an allowed one
    if not found:
        cause = "release" if kind == "release" else "failed_accept"
        assert r["redeliveries"][cause] == 1 and r["valid"] is True


def test_an_unfinished_commit_is_unknown_and_so_allows_a_redelivery():
    h = History().send(1).poll(0, (0, 1, 1, 1))
    h._op(process=0, type="invoke", f="share-ack", acks=[[0, 1, "accept"]])  # never completes
    h.poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2))
    r = h.check()
    assert kinds(r) == {} and r["redeliveries"]["failed_accept"] == 1


def test_a_commit_that_raised_leaves_every_acknowledgement_of_it_unknown():
    h = History().send(1).poll(0, (0, 1, 1, 1))
    h._op(process=0, type="invoke", f="share-ack", acks=[[0, 1, "accept"]])
    h._op(process=0, type="info", f="share-ack", error="TimeoutException")  # no acks: none was told
    r = h.poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2)).check()
    assert kinds(r) == {} and r["redeliveries"]["failed_accept"] == 1


def test_asynchronous_commits_complete_inside_later_polls_and_by_their_records():
    """commitAsync: two share-acks of process 0 open at once, their callbacks told inside its next poll, the
    newer one's first. Each completion goes to the share-ack holding its records."""
    h = History().send(1).send(2).poll(0, (0, 1, 1, 1), (0, 2, 2, 1))
    h._op(process=0, type="invoke", f="share-ack", acks=[[0, 1, "accept"]])
    h._op(process=0, type="invoke", f="share-ack", acks=[[0, 2, "release"]])
    h._op(process=0, type="invoke", f="share-poll")
    h._op(process=0, type="ok", f="share-ack", acks=[[0, 2, "release", "ok"]])
    h._op(process=0, type="ok", f="share-ack", acks=[[0, 1, "accept", "ok"]])
    h._op(process=0, type="ok", f="share-poll", records=[])
    r = h.poll(1, (0, 2, 2, 2)).ack(1, (0, 2, "accept", "ok")).state(p0=(3, 3)).check()
    assert r["valid"] is True and kinds(r) == {} and r["redeliveries"]["release"] == 1
    # Had the release's completion been paired with the accept's invocation, record 1's committed ACCEPT would
    # have been lost, and a redelivery of record 1 would go unnoticed.
    h = History().send(1).send(2).poll(0, (0, 1, 1, 1), (0, 2, 2, 1))
    h._op(process=0, type="invoke", f="share-ack", acks=[[0, 1, "accept"]])
    h._op(process=0, type="invoke", f="share-ack", acks=[[0, 2, "release"]])
    h._op(process=0, type="ok", f="share-ack", acks=[[0, 2, "release", "ok"]])
    h._op(process=0, type="ok", f="share-ack", acks=[[0, 1, "accept", "ok"]])
    r = h.poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok")).state(p0=(3, 3)).check()
    assert kinds(r) == {"redelivered_after_accept": 1}


def test_a_delivery_over_the_limit():
    h = History().send(1)
    for n in range(1, LIMIT + 2):
        h.poll(0, (0, 1, 1, n)).ack(0, (0, 1, "release", "ok"))
    r = h.state(p0=(2, 2)).check()
    assert kinds(r) == {"over_delivery_limit": 1} and r["examples"]["over_delivery_limit"] == [[0, 1, 1]]


def test_a_delivery_count_that_does_not_rise():
    h = (History().send(1).poll(0, (0, 1, 1, 2)).ack(0, (0, 1, "release", "ok"))
         .poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2)))
    assert kinds(h.check()) == {"delivery_count_regressed": 1}


def test_two_members_holding_one_record_within_its_lock():
    # Member 1 acquires the record 20 ms after member 0 did, with no acknowledgement or leave in between.
    h = History().send(1).poll(0, (0, 1, 1, 1)).poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok"))
    r = h.state(p0=(2, 2)).check()
    assert kinds(r) == {"concurrent_acquisition": 1}
    # Past the lock duration the second acquisition is what the lock's expiry allows.
    h = History().send(1).poll(0, (0, 1, 1, 1)).poll(1, (0, 1, 1, 2), gap_ms=0)
    for op in h.ops[-2:]:
        op["time"] += 2 * LOCK_MS * MS
    r = h.ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2)).check()
    assert kinds(r) == {} and r["redeliveries"]["lock_timeout"] == 1
    # A member that left released what it held.
    h = History().send(1).poll(0, (0, 1, 1, 1)).leave(0).poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok"))
    r = h.state(p0=(2, 2)).check()
    assert kinds(r) == {} and r["redeliveries"]["crash"] == 1


@st.composite
def correct_histories(draw) -> History:
    """A history a correct share group could give: records delivered one holder at a time, each acknowledged
    (accept, release or reject) before the next delivery, counts rising by one, nothing past the limit, nothing
    accepted or rejected delivered again, and a final drain that completed."""
    h = History()
    n = draw(st.integers(1, 6))
    for v in range(1, n + 1):
        h.send(v)
    for v in range(1, n + 1):
        count = 0
        while True:
            count += 1
            member = draw(st.integers(0, 2))
            kind = "accept" if count == LIMIT else draw(st.sampled_from(["accept", "release", "reject"]))
            h.poll(member, (0, v, v, count)).ack(member, (0, v, kind, "ok"))
            if kind != "release":
                break
    return h.state(p0=(n + 1, n + 1))


@settings(max_examples=100, deadline=None)
@given(correct_histories())
def test_every_history_of_a_correct_share_group_is_valid(h):
    r = h.check()
    assert r["valid"] is True and kinds(r) == {}, r
    assert sum(r["redeliveries"].values()) == r["counts"]["redelivered"]
    assert set(r["redeliveries"]) == set(CAUSES)
    assert r["counts"]["accepted_twice"] == 0


def test_consume_counts_say_per_member_how_many_records_it_was_delivered_how_many_times():
    h = (History().send(1).send(2)
         .poll(0, (0, 1, 1, 1), (0, 2, 2, 1)).ack(0, (0, 1, "release", "ok"), (0, 2, "accept", "ok"))
         .poll(0, (0, 1, 1, 2)).ack(0, (0, 1, "release", "ok"))
         .poll(1, (0, 1, 1, 3)).ack(1, (0, 1, "accept", "ok")).state(p0=(3, 3)))
    r = h.check()
    assert r["consume_counts"] == {"0": {"1": 1, "2": 1}, "1": {"1": 1}}
    assert r["counts"]["member_duplicates"] == 1  # record 1, twice to member 0


def test_a_record_is_accepted_twice_only_when_two_accepts_were_told_committed():
    def accepted_twice(*outcomes: str) -> int:
        h = History().send(1)
        for count, outcome in enumerate(outcomes, 1):
            h.poll(count % 2, (0, 1, 1, count)).ack(count % 2, (0, 1, "accept", outcome))
        return h.state(p0=(2, 2)).check()["counts"]["accepted_twice"]
    assert accepted_twice("ok") == 0
    assert accepted_twice("fail", "ok") == accepted_twice("info", "ok") == accepted_twice("ok", "fail") == 0
    assert accepted_twice("ok", "ok") == accepted_twice("fail", "ok", "ok") == 1


def test_the_share_plot_is_a_png_even_when_empty_and_marks_its_anomalies():
    import io

    import matplotlib.colors as mcolors
    import matplotlib.image as mpimg

    from kchaos.reports.run.share_plots import MARK_STYLES, share_png

    r = (History().send(1).poll(0, (0, 1, 1, 2)).ack(0, (0, 1, "release", "ok"))
         .poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2)).check())
    assert r["marks"]
    color = np.array(mcolors.to_rgb(MARK_STYLES["delivery_count_regressed"]["color"]))

    def marked(data: bytes) -> int:
        img = mpimg.imread(io.BytesIO(data))[..., :3]
        return int((np.abs(img - color).max(axis=-1) < 0.1).sum())
    plain = share_png(r["per_second"], counts=r["counts"])
    drawn = share_png(r["per_second"], marks=r["marks"], counts=r["counts"], rebalances=[0.01], span=[0.0, 1.0])
    empty = share_png([], marks={}, counts={})
    for data in (plain, drawn, empty):
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert marked(drawn) > marked(plain)


def test_a_count_that_went_back_after_its_member_left_is_no_concurrent_acquisition():
    # Kafka 4.1.0 under kill-leader: member 4 got the record with count 2 and left; a drainer, whose first poll was
    # invoked after member 4's completed, got it with count 1 within the lock. The lower count does not make the
    # drainer's acquisition the earlier one: it came after member 4's poll, so only the count is wrong.
    h = History().send(1).poll(4, (0, 1, 1, 2)).ack(4, (0, 1, "accept", "info")).leave(4)
    r = h.poll(7, (0, 1, 1, 1)).ack(7, (0, 1, "accept", "ok")).state(p0=(2, 2)).check()
    assert kinds(r) == {"delivery_count_regressed": 1}
    # Had the drainer's client fetched it before member 4's poll completed, the drainer would have held it first.
    h = History().send(1).poll(7).poll(4, (0, 1, 1, 2)).poll(7, (0, 1, 1, 1)).ack(4, (0, 1, "accept", "ok"))
    assert kinds(h.state(p0=(2, 2)).check()) == {"concurrent_acquisition": 1}


def test_a_record_fetched_ahead_while_its_member_worked_may_lose_its_lock_before_the_member_polls_it():
    # KafkaShareConsumer sends its next ShareFetch when a poll is invoked: member 0's second poll returns a record
    # that may have been acquired at its first poll's invocation, 2 s before; its 1 s lock may have expired by the
    # time member 1 gets it 0.5 s after that second poll. Not surely concurrent: a lock timeout.
    h = History().send(1).poll(0).poll(0, (0, 1, 1, 1))  # member 0's first poll returns nothing
    for op in h.ops[-2:]:
        op["time"] += 2 * LOCK_MS * MS
    h.poll(1, (0, 1, 1, 2))
    for op in h.ops[-2:]:
        op["time"] += 2 * LOCK_MS * MS + 500 * MS
    r = h.ack(1, (0, 1, "accept", "ok")).state(p0=(2, 2)).check()
    assert kinds(r) == {} and r["redeliveries"]["lock_timeout"] == 1
    # Had member 0 polled just before, its record could not have lost its lock yet: surely concurrent.
    h = History().send(1).poll(0).poll(0, (0, 1, 1, 1)).poll(1, (0, 1, 1, 2)).ack(1, (0, 1, "accept", "ok"))
    assert kinds(h.state(p0=(2, 2)).check()) == {"concurrent_acquisition": 1}


def test_a_copy_fetched_ahead_and_handed_out_after_another_members_accept_is_a_lock_timeout_not_after_accept():
    # Kafka 4.3.1, partition 1, offset 110: member 5's client acquired the record (count 2 here) while its application
    # worked, its lock expired, member 6 got it again (count 3) and accepted it, told ok; member 5's poll then
    # returned its own older copy, whose ACCEPT Kafka also answered ok (the offset was below the start offset).
    h = History().send(1).poll(5).poll(5, (0, 0, 0, 1))  # member 5's first poll returns nothing
    for op in h.ops[-2:]:
        op["time"] += 2 * LOCK_MS * MS
    h.poll(6, (0, 1, 1, 3)).ack(6, (0, 1, "accept", "ok")).poll(5, (0, 1, 1, 2)).ack(5, (0, 1, "accept", "ok"))
    for op in h.ops[-8:]:
        op["time"] += 4 * LOCK_MS * MS
    r = h.ack(5, (0, 0, "accept", "ok")).state(p0=(2, 2)).check()
    assert kinds(r) == {} and r["redeliveries"] == {**dict.fromkeys(CAUSES, 0), "lock_timeout": 1}
    assert r["counts"]["accepted_twice"] == 1  # both members were told their ACCEPT committed
    # The same records with a higher count after the ACCEPT: Kafka acquired the record again after accepting it.
    h = History().send(1).poll(5).poll(5, (0, 0, 0, 1))
    h.poll(6, (0, 1, 1, 2)).ack(6, (0, 1, "accept", "ok")).poll(5, (0, 1, 1, 3)).ack(5, (0, 1, "accept", "ok"))
    assert kinds(h.ack(5, (0, 0, "accept", "ok")).state(p0=(2, 2)).check()) == {"redelivered_after_accept": 1}
