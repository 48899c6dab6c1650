"""Dependency cycles between transactions of a txn history: G0 and G1c, as Elle finds them for Kafka.

The graph's nodes are the transactions that completed ok or info (those that may have committed), named by
their invocation's line index. Its edges, with the fact that makes each (its *witness*):

- ww T1 -> T2: in a partition's version order (`version_order`) restricted to offsets holding a value
  sent by a node, T1 sent a value at one such offset and T2 one at the next (Jepsen treats each partition as a
  list-append object whose order is the offsets); witness (partition, offset, value, offset', value');
- wr T1 -> T2: T2 polled a value T1 sent. Of T2's reads of one partition only the highest offset (whose writer
  is a node other than T2) makes an edge: each lower read's writer reaches that one's by ww edges, so the
  strongly connected components, and hence the counts, are those of the graph with every wr edge, and the graph
  stays small; witness (partition, offset, value).

Self-edges are left out. `G0` counts the strongly connected components (of two or more transactions) of the ww
edges alone; `G1c` those of ww and wr edges that contain a wr edge between two of their members (a cycle through
it exists); `G1c_wr` those of every wr edge alone (each read, not only the highest: transactions each of which
read another's write, which no read_committed history can show). Each gets one example: a shortest cycle (ww
only; through a wr edge) found in the component with the smallest transaction, as a table of its edges and why
each exists.

`cycles` is the one search both checkers run on their edge arrays, so equal edge sets give equal answers.
Components are found by networkx on only the edges that can lie on a cycle: with nodes numbered by history
order, every cycle has an edge pointing back, and lies within one merged span [target, source] of such edges.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import networkx as nx
import numpy as np

from kchaos.checkers.txn.tasks import EDGE_COLUMNS, GROUPS, WR, WR_ALL, WW, edge_array, spans, within

__all__ = ["CYCLE_COUNTS", "WR", "WR_ALL", "WW", "cycles", "edge_array", "reference_edges"]

EDGE_NAMES = ("ww", "wr", "wr")
CYCLE_COUNTS = ("G0", "G1c", "G1c_wr")
CANDIDATES = 32  # transactions (or wr edges) of a component a shortest example cycle is searched through


def reference_edges(txns: list[Any], log: dict[int, dict[int, set[int]]]) -> np.ndarray:
    """The ww and wr edges (edge_array) of transactions `txns` (`lines.Txn`s) and version order `log`."""
    nodes = {t.index for t in txns if t.type in ("ok", "info")}
    writer = {v: t.index for t in txns if t.index in nodes for v, _, _ in t.sends}
    rows: list[tuple[int, ...]] = []
    for p, at in log.items():
        prev: list[tuple[int, int, int]] = []  # (writer, offset, value) at the previous offset with a node's value
        for o in sorted(at):
            here = [(writer[v], o, v) for v in sorted(at[o]) if v in writer]
            if not here:
                continue
            rows += [(w1, w2, WW, p, o1, v1, o2, v2) for w1, o1, v1 in prev for w2, o2, v2 in here if w1 != w2]
            prev = here
    for t in txns:
        if t.index not in nodes:
            continue
        top: dict[int, tuple[int, int]] = {}  # p -> the highest (offset, -value) read with a node writer
        for records in t.polls:
            for p, o, v in records:
                if writer.get(v, t.index) != t.index and (p not in top or (o, -v) > top[p]):
                    top[p] = (o, -v)
        rows += [(writer[-nv], t.index, WR, p, o, -nv, o, -nv) for p, (o, nv) in top.items()]
        rows += [(writer[v], t.index, WR_ALL, p, o, v, o, v) for records in t.polls for p, o, v in records
                 if writer.get(v, t.index) != t.index]
    return edge_array(rows)


def _cyclic_part(edges: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """The edges of those `marked` that can lie on a cycle among them (both ends within one merged span of their
    backward edges), as edge_array gives them: sorted, each once with its smallest witness."""
    rows = np.flatnonzero(marked)
    src, dst = edges[rows, 0], edges[rows, 1]
    # Whether an edge can lie on a cycle depends on its ends alone, so the few that can are sorted and deduped,
    # not the millions a long history has.
    return edge_array(edges[rows[within(src, dst, *spans(src, dst))]])


def _graph(edges: np.ndarray) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_edges_from(map(tuple, edges[:, :2].tolist()))
    return g


def _components(edges: np.ndarray) -> tuple[nx.DiGraph, list[list[int]]]:
    g = _graph(edges)
    comps = sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)
    return g, comps


def _shortest_cycle(g: nx.DiGraph, comp: list[int]) -> list[int]:
    sub = g.subgraph(comp)
    best: list[int] | None = None
    for n in comp[:CANDIDATES]:
        paths = nx.single_source_shortest_path(sub, n)
        for u in sorted(sub.predecessors(n)):
            cycle = paths[u]
            if best is None or (len(cycle), cycle) < (len(best), best):
                best = cycle
    return best or []


def _shortest_cycle_through(g: nx.DiGraph, comp: list[int], wr: list[tuple[int, int]]) -> list[int]:
    sub = g.subgraph(comp)
    best: list[int] | None = None
    for u, v in wr[:CANDIDATES]:
        cycle = [u] + nx.shortest_path(sub, v, u)[:-1]  # u -wr-> v ~> u
        if best is None or (len(cycle), cycle) < (len(best), best):
            best = cycle
    return best or []


def _witness(edges: np.ndarray, a: int, b: int, kinds: tuple[int, ...]) -> list[int]:
    """(kind, p, o1, v1, o2, v2) of edge a -> b: of its kinds in `kinds`, the first (edges are deduped, sorted)."""
    hit = edges[(edges[:, 0] == a) & (edges[:, 1] == b) & np.isin(edges[:, 2], kinds)]
    return hit[0, 2:].tolist()


def _table(cycle: list[int], edges: np.ndarray, kinds: tuple[int, ...], first: int | None = None
           ) -> dict[str, Any]:
    rows = []
    for i, (a, b) in enumerate(zip(cycle, cycle[1:] + cycle[:1])):
        w = _witness(edges, a, b, (first,) if i == 0 and first is not None else kinds)
        kind, p, o1, v1, o2, v2 = w
        why = (f"op {a} sent {v1} to partition {p} at offset {o1}; op {b} sent {v2} at offset {o2}, the next"
               if kind == WW else f"op {b} polled {v1} at partition {p} offset {o1}, which op {a} sent")
        rows.append({"from": a, "to": b, "edge": EDGE_NAMES[kind], "partition": p, "why": why})
    return {"ops": cycle, "edges": rows}


def cycles(edges: np.ndarray) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """({"G0": n, "G1c": m, "G1c_wr": k}, {kind: example}) of an edge array (edge_array's form, any order,
    duplicates allowed).

    An example is `{"ops": [invocation indexes around the cycle], "edges": [{"from", "to", "edge", "partition",
    "why"}, ...]}`, one row per edge of the cycle in order; kinds with a zero count have none.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, len(EDGE_COLUMNS))
    g0, g1c_wr, g1c = (np.isin(edges[:, 2], kinds) for kinds in GROUPS)
    counts, examples = {}, {}
    ww = _cyclic_part(edges, g0)
    g, comps = _components(ww)
    counts["G0"] = len(comps)
    if comps:
        examples["G0"] = _table(_shortest_cycle(g, comps[0]), ww, (WW,))
    every = _cyclic_part(edges, g1c_wr)
    g, comps = _components(every)
    counts["G1c_wr"] = len(comps)
    if comps:
        examples["G1c_wr"] = _table(_shortest_cycle(g, comps[0]), every, (WR_ALL,))
    part = _cyclic_part(edges, g1c)
    g, comps = _components(part)
    member = {n: i for i, c in enumerate(comps) for n in c}
    wr_in: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s, d in part[part[:, 2] == WR][:, :2].tolist():
        if s in member and member[s] == member.get(d):
            wr_in[member[s]].append((s, d))
    counts["G1c"] = len(wr_in)
    if wr_in:
        first = min(wr_in)
        examples["G1c"] = _table(_shortest_cycle_through(g, comps[first], sorted(wr_in[first])), part, (WW, WR),
                                  first=WR)
    return counts, examples
