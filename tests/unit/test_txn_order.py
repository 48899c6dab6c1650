"""The txn reference checker's order and cycle anomalies (checkers/txn/order.py, checkers/txn/cycles.py), each
planted in a tiny history; an acyclic history has no cycle, and a rebalance excuses a jump."""
from __future__ import annotations

import numpy as np
import pytest
from test_txn_checker import RC, RU, H, found

from kchaos.checkers.txn.cycles import WR, WR_ALL, WW, cycles, edge_array


def rebalance(h: H, process: int, revoked=(), assigned=()) -> H:
    return h.add(process=process, type="ok", f="rebalance", revoked=list(revoked), assigned=list(assigned))


def three() -> H:
    """Committed values 10, 11, 12 at partition 0 offsets 0, 1, 2, drained completely."""
    return (H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(0, "ok", sends=[(0, 11, 0, 1)])
            .txn(0, "ok", sends=[(0, 12, 0, 2)]))


def test_precommitted_read_is_a_transaction_polling_its_own_send():
    h = H().txn(0, "ok", sends=[(0, 10, 0, 0)], polls=[[[0, 0, 10]]]).drain(0, [[0, 0, 10]])
    r = h.check(RC)
    assert found(r) == {"precommitted_read": 1} and r["examples"]["precommitted_read"] == [10]
    assert r["valid"] is False and h.check(RU)["valid"] is True  # a read_uncommitted poll sees its own sends


def test_inconsistent_offsets_is_one_offset_holding_two_values():
    h = H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(1, "ok", polls=[[[0, 0, 11]]]).drain(0, [[0, 0, 10]])
    r = h.check()
    assert r["counts"]["inconsistent_offsets"] == 1 and r["examples"]["inconsistent_offsets"] == [[0, 0]]
    # an aborted send at that offset is not in the version order: a read_committed reader passes over it
    ok = H().txn(0, "fail", sends=[(0, 10, 0, 0)]).txn(1, "ok", polls=[[[0, 0, 11]]]).drain(0, [[0, 0, 11]])
    assert ok.check()["counts"]["inconsistent_offsets"] == 0


def test_poll_skip_and_nonmonotonic_poll_between_transactions_of_one_process():
    h = three().txn(1, "ok", polls=[[[0, 0, 10]]]).txn(1, "ok", polls=[[[0, 2, 12]]])
    h.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    r = h.check()
    assert found(r) == {"poll_skip": 1} and r["examples"]["poll_skip"] == [[1, 0, 0, 2]]
    back = three().txn(1, "ok", polls=[[[0, 1, 11]]]).txn(1, "fail", polls=[[[0, 1, 11]]])
    back.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    assert found(back.check()) == {"nonmonotonic_poll": 1}
    # other processes' streams are not compared, and a jump over offsets nothing shows is no skip
    other = three().txn(1, "ok", polls=[[[0, 0, 10]]]).txn(2, "ok", polls=[[[0, 2, 12]]])
    other.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    assert found(other.check()) == {}


def test_int_poll_kinds_are_within_one_transaction():
    h = three().txn(1, "ok", polls=[[[0, 0, 10], [0, 2, 12]], [[0, 1, 11]]])
    h.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    r = h.check()
    assert found(r) == {"int_poll_skip": 1, "int_nonmonotonic_poll": 1}
    assert r["examples"]["int_poll_skip"] == [[6, 0, 0, 2]] and r["examples"]["int_nonmonotonic_poll"] == [[6, 0, 2, 1]]


def test_a_rebalance_of_the_partition_excuses_the_jump():
    h = three().txn(1, "ok", polls=[[[0, 0, 10]]])
    rebalance(h, 1, revoked=[0], assigned=[0]).txn(1, "ok", polls=[[[0, 2, 12]]])
    h.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    assert found(h.check()) == {}
    # a rebalance of another partition, or of another process, does not
    for who, part in ((1, 1), (2, 0)):
        g = three().txn(1, "ok", polls=[[[0, 0, 10]]])
        rebalance(g, who, assigned=[part]).txn(1, "ok", polls=[[[0, 2, 12]]])
        g.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
        assert found(g.check()) == {"poll_skip": 1}


def test_a_rebalance_during_a_transaction_excuses_its_internal_jump():
    h = three()
    h.add(process=1, type="invoke", f="txn", value=[["poll"]])
    rebalance(h, 1, assigned=[0])
    h.add(process=1, type="ok", f="txn", value=[["poll", [[0, 0, 10], [0, 2, 12]]]])
    h.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    assert found(h.check()) == {}


def test_send_kinds():
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 5)]).txn(0, "ok", sends=[(0, 11, 0, 3)])  # went back: nonmonotonic
         .txn(1, "ok", sends=[(0, 12, 0, 7), (0, 13, 0, 6)])  # back within one transaction
         .txn(2, "ok", sends=[(0, 14, 0, 8), (0, 15, 0, 10)]).txn(3, "ok", sends=[(0, 16, 0, 9)]))  # interleaved
    h.drain(0, [[0, o, v] for o, v in ((3, 11), (5, 10), (6, 13), (7, 12), (8, 14), (9, 16), (10, 15))])
    r = h.check()
    assert {k: r["counts"][k] for k in ("nonmonotonic_send", "int_nonmonotonic_send", "int_send_skip")} == \
        {"nonmonotonic_send": 1, "int_nonmonotonic_send": 1, "int_send_skip": 1}
    assert r["examples"]["nonmonotonic_send"] == [[0, 0, 5, 3]] and r["examples"]["int_send_skip"] == [[6, 0, 8, 10]]
    assert r["valid"] is False


def test_a_planted_G0_is_found_with_its_cycle():
    # T0 and T1 interleave their sends over two partitions: 0 then 1 in partition 0, 1 then 0 in partition 1
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0), (1, 11, 1, 1)]).txn(1, "ok", sends=[(0, 12, 0, 1), (1, 13, 1, 0)])
         .drain(0, [[0, 0, 10], [0, 1, 12]]).drain(1, [[1, 0, 13], [1, 1, 11]]))
    r = h.check()
    assert found(r) == {"G0": 1} and r["valid"] is True  # Kafka does not isolate writes; no wr edge, no G1c
    g0 = r["cycles"]["G0"]
    assert g0["ops"] == [0, 2] and [e["edge"] for e in g0["edges"]] == ["ww", "ww"]
    assert "op 0 sent 10 to partition 0 at offset 0; op 2 sent 12 at offset 1" in g0["edges"][0]["why"]


def test_a_planted_G1c_is_found_and_needs_a_wr_edge():
    # T0 writes 10 then T1 writes 11 after it in partition 0 (ww T0 -> T1); T0 polled 12, which T1 sent (wr T1 -> T0)
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0)], polls=[[[1, 0, 12]]])
         .txn(1, "ok", sends=[(0, 11, 0, 1), (1, 12, 1, 0)])
         .drain(0, [[0, 0, 10], [0, 1, 11]]).drain(1, [[1, 0, 12]]))
    r = h.check()
    assert found(r) == {"G1c": 1}
    c = r["cycles"]["G1c"]
    assert c["ops"] == [2, 0] and [e["edge"] for e in c["edges"]] == ["wr", "ww"]
    assert "op 0 polled 12 at partition 1 offset 0, which op 2 sent" in c["edges"][0]["why"]


def test_an_acyclic_history_has_no_cycle():
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0)]).txn(1, "ok", sends=[(0, 11, 0, 1)], polls=[[[0, 0, 10]]])
         .txn(0, "ok", polls=[[[0, 0, 10], [0, 1, 11]]]).drain(0, [[0, 0, 10], [0, 1, 11]]))
    r = h.check()
    assert found(r) == {} and "cycles" in r and r["cycles"] == {}


def test_cycles_counts_components_and_ignores_what_cannot_cycle():
    rows = [(1, 2, WW, 0, 0, 1, 1, 2), (2, 1, WW, 1, 0, 3, 1, 4),  # G0 on {1, 2}
            (5, 6, WW, 0, 5, 7, 6, 8), (6, 5, WR, 1, 3, 9, 3, 9),  # G1c on {5, 6}
            (2, 5, WW, 0, 1, 2, 5, 7)]  # joins them one way only
    counts, ex = cycles(np.array(rows + rows[:1]))
    assert counts == {"G0": 1, "G1c": 1, "G1c_wr": 0} and ex["G0"]["ops"] == [1, 2] and ex["G1c"]["ops"] == [6, 5]
    assert cycles(edge_array([]))[0] == {"G0": 0, "G1c": 0, "G1c_wr": 0}
    both_ways = [(1, 2, WR_ALL, 0, 0, 5, 0, 5), (2, 1, WR_ALL, 1, 0, 6, 0, 6)]
    counts, ex = cycles(np.array(both_ways))
    assert counts == {"G0": 0, "G1c": 0, "G1c_wr": 1} and [e["edge"] for e in ex["G1c_wr"]["edges"]] == ["wr", "wr"]


@pytest.mark.spark
def test_the_verdict_fails_order_anomalies_and_allows_what_kafka_allows(tmp_path):
    from kchaos.checkers import check_path

    g0 = (H().txn(0, "ok", sends=[(0, 10, 0, 0), (1, 11, 1, 1)]).txn(1, "ok", sends=[(0, 12, 0, 1), (1, 13, 1, 0)])
          .drain(0, [[0, 0, 10], [0, 1, 12]]).drain(1, [[1, 0, 13], [1, 1, 11]]))
    r = check_path(g0.write(tmp_path / "g0"))
    assert (r["verdict"], r["failed"], r["allowed"]) == ("pass", {}, {"G0": 1})
    assert r["cycles"]["G0"]["ops"] == [0, 2]
    own = H().txn(0, "ok", sends=[(0, 10, 0, 0)], polls=[[[0, 0, 10]]]).drain(0, [[0, 0, 10]])
    assert check_path(own.write(tmp_path / "rc", RC))["failed"] == {"precommitted_read": 1}
    ru = check_path(own.write(tmp_path / "ru", RU))
    assert (ru["verdict"], ru["allowed"]) == ("pass", {"precommitted_read": 1})
    skip = three().txn(1, "ok", polls=[[[0, 0, 10]]]).txn(1, "ok", polls=[[[0, 2, 12]]])
    skip.drain(0, [[0, 0, 10], [0, 1, 11], [0, 2, 12]])
    s = check_path(skip.write(tmp_path / "skip"))
    assert (s["verdict"], s["failed"]) == ("fail", {"poll_skip": 1})


def test_the_rebalance_example_of_docs_history_md_parses():
    import json
    from pathlib import Path

    from kchaos.checkers.txn.history import parse_ops

    text = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
    block = text.split("### Rebalances", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    parsed = parse_ops(enumerate([json.loads(line) for line in block.strip().splitlines()], 1))
    assert parsed.rebalances == [(7, 1, frozenset({0, 1, 2})), (8, 2, frozenset({0}))]


def test_pruning_to_backward_spans_keeps_every_component():
    import networkx as nx
    from hypothesis import given, settings
    from hypothesis import strategies as st

    edge = st.tuples(st.integers(0, 30), st.integers(0, 30), st.sampled_from([WW, WR, WR_ALL]))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(edge, max_size=60))
    def check(rows):
        rows = [(s, d, k, 0, 0, 0, 0, 0) for s, d, k in rows if s != d]
        counts, examples = cycles(np.array(rows, np.int64).reshape(-1, 8))
        ww = nx.DiGraph([(s, d) for s, d, k, *_ in rows if k == WW])
        every = nx.DiGraph([(s, d) for s, d, k, *_ in rows if k == WR_ALL])
        full = nx.DiGraph([(s, d) for s, d, k, *_ in rows if k != WR_ALL])
        comps = [c for c in nx.strongly_connected_components(full) if len(c) > 1]
        with_wr = [c for c in comps if any(k == WR and s in c and d in c for s, d, k, *_ in rows)]
        assert counts == {"G0": sum(len(c) > 1 for c in nx.strongly_connected_components(ww)),
                          "G1c": len(with_wr),
                          "G1c_wr": sum(len(c) > 1 for c in nx.strongly_connected_components(every))}
        for kind, ex in examples.items():  # every example is a real cycle of that kind's edges
            cyc = ex["ops"]
            assert all(e["from"] == a and e["to"] == b for e, a, b in zip(ex["edges"], cyc, cyc[1:] + cyc[:1]))
            assert (kind == "G0") == all(e["edge"] == "ww" for e in ex["edges"])
            assert any(e["edge"] == "wr" for e in ex["edges"]) if kind == "G1c" else True
            assert all(e["edge"] == "wr" for e in ex["edges"]) if kind == "G1c_wr" else True
    check()


def test_the_edges_the_cyclic_tasks_keep_give_the_cycles_of_every_edge(tmp_path_factory):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kchaos.checkers.txn.tasks import cyclic_task, group_spans

    edge = st.tuples(st.integers(0, 30), st.integers(0, 30), st.sampled_from([WW, WR, WR_ALL]),
                     st.integers(0, 3), st.integers(0, 9))
    tmp = tmp_path_factory.mktemp("edges")

    @settings(max_examples=200, deadline=None)
    @given(st.lists(edge, max_size=60), st.lists(st.integers(0, 3), min_size=60, max_size=60))
    def check(rows, task_of):
        # as partition tasks leave them: unsorted, duplicates with other witnesses, spread over several files
        rows = [(s, d, k, p, o, o, o, o) for s, d, k, p, o in rows if s != d]
        edges = np.array(rows, np.int64).reshape(-1, 8)
        parts = [edges[[t == i for t in task_of[:len(edges)]]] for i in range(4)]
        for i, part in enumerate(parts):
            np.savez(tmp / f"edges{i}.npz", edges=part)
        backward = np.concatenate([p[p[:, 1] < p[:, 0]] for p in parts])
        kept = [cyclic_task((str(tmp / f"edges{i}.npz"), group_spans(backward))) for i in range(4)]
        assert cycles(np.concatenate([np.zeros((0, 8), np.int64), *kept])) == cycles(edges)
    check()


@pytest.mark.spark
def test_a_cycle_of_wr_edges_alone_fails_under_read_committed_only(tmp_path):
    from kchaos.checkers import check_path

    # each transaction polled the other's send: both saw the other's write before committing
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0)], polls=[[[1, 0, 11]]])
         .txn(1, "ok", sends=[(1, 11, 1, 0)], polls=[[[0, 0, 10]]])
         .drain(0, [[0, 0, 10]]).drain(1, [[1, 0, 11]]))
    r = h.check()
    assert found(r) == {"G1c": 1, "G1c_wr": 1} and r["cycles"]["G1c_wr"]["ops"] == [0, 2]
    rc = check_path(h.write(tmp_path / "rc", RC))
    assert (rc["verdict"], rc["failed"], rc["allowed"]) == ("fail", {"G1c_wr": 1}, {"G1c": 1})
    ru = check_path(h.write(tmp_path / "ru", RU))
    assert (ru["verdict"], ru["allowed"]) == ("pass", {"G1c": 1, "G1c_wr": 1})
