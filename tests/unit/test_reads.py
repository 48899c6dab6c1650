"""What a queue run's consumers read: unseen writes over time and each consumer's realtime lag, from the history's
Parquet form, as report.html plots them."""
from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from histories import HistoryBuilder

from kchaos.checkers.parquet import convert
from kchaos.reports.run.reads import lag_series, read_reads, unseen_series
from kchaos.reports.run.txn_data import Rebalance


def two_writes_read_late(tmp_path):
    """Ops half a second apart: v1 and v2 acknowledged at 1.0 and 2.0 s on p0, a consumer polling from 3.0 s that
    reads v1 at 4.0 s and v2 at 6.0 s."""
    h = HistoryBuilder(step_ms=500)
    h.send(0, 1, 0, offset=0).send(0, 2, 0, offset=1)
    h.poll(4, []).poll(4, [(0, 0, 1)]).poll(4, []).poll(4, [(0, 1, 2)]).poll(4, [])
    run = h.write(tmp_path / "run")
    return read_reads(pq.read_table(convert(run / "history.jsonl")))


def test_unseen_counts_what_was_acknowledged_and_not_yet_read(tmp_path):
    reads = two_writes_read_late(tmp_path)
    assert list(reads.value) == [1, 2] and list(reads.time_s) == [4.0, 6.0] and reads.poll.all()
    times, unseen = unseen_series(np.array([1, 2]), np.array([1.0, 2.0]), reads)
    at = {t: unseen[np.searchsorted(times, t, "right") - 1] for t in (1.0, 2.5, 4.5, 6.5)}
    assert at == {1.0: 1, 2.5: 2, 4.5: 1, 6.5: 0}
    assert times[0] == 1.0 and times[-1] == 6.0


def test_realtime_lag_is_how_far_behind_each_poll_found_its_consumer(tmp_path):
    reads = two_writes_read_late(tmp_path)
    lags = lag_series(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 2.0]), reads, [], [0])
    (times, lag), = lags.values()
    assert list(times) == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert list(lag) == pytest.approx([2.0, 3.0, 3.0, 4.0, 0.0])  # v1 unread since 1.0 s, then v2 since 2.0 s


def test_a_consumer_lags_only_on_the_partitions_assigned_to_it(tmp_path):
    reads = two_writes_read_late(tmp_path)
    (proc,) = set(reads.polls.process)
    elsewhere = [Rebalance(0.0, proc, assigned=(1,))]  # it holds p1 only: p0's writes are another member's
    (_, lag), = lag_series(np.array([0, 0]), np.array([0, 1]), np.array([1.0, 2.0]), reads, elsewhere, [0, 1]).values()
    assert not lag.any()


def test_the_sends_errors_per_second_plot_draws_the_most_frequent_and_sums_the_rest():
    from kchaos.reports.run.read_plots import MOST_ERRORS, errors_png
    names = [f"ERROR_{i}" for i in range(MOST_ERRORS + 3)]
    errors = np.array([n for i, n in enumerate(names) for _ in range(i + 1)], dtype=object)
    png = errors_png(np.linspace(0, 10, len(errors)), errors, span=[0.0, 10.0])
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert errors_png(np.zeros(0), np.zeros(0, object)).startswith(b"\x89PNG")  # says every send succeeded
