"""The share checker on Spark against the reference, on the labelled corpus: the same result, whatever the number of
stretches and buckets the history is cut into, with crashes and without."""
from __future__ import annotations

import pytest
from corpora.share import generate, write

from kchaos.checkers.history_scan import read_ops
from kchaos.checkers.share.check import check_share_spark
from kchaos.checkers.share.reference import check_share_ops
from kchaos.checkers.spark import spark_context

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("seed, crashes, stretch_bytes, buckets", [
    (1, False, 1 << 20, 1), (2, True, 1 << 20, 1), (3, False, 4096, 3), (4, True, 2048, 4), (5, False, 8192, 2)])
def test_spark_gives_the_references_result_on_the_corpus(tmp_path, seed, crashes, stretch_bytes, buckets):
    corpus = generate(seed, records=400, per_kind=2, crashes=crashes, lock_ms=2000)
    history = write(corpus, tmp_path / "run")
    limit, lock_ms = corpus.test["workload"]["options"]["delivery_limit"], corpus.test["workload"]["options"]["lock_ms"]
    want = check_share_ops(read_ops(history), limit, lock_ms)
    got = check_share_spark(spark_context("local[2]"), history, limit, lock_ms, stretch_bytes, buckets)
    assert got == want
    assert {k: {tuple(x) for x in v} for k, v in got["examples"].items()} == \
        {k: v for k, v in corpus.planted.items() if v}  # the planted records, no other
    assert not (tmp_path / "run" / "history.share").exists()  # its work files are gone
