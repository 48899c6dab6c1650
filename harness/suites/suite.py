"""Suite files: a named matrix of `kchaos run` options, expanded into cells, each run `repeat` times.

    name: quick                  # default: the file name without .yaml
    description: one line
    seed: 7                      # every run's seed is drawn from it (default: random, saved)
    repeat: 2                    # runs per cell
    base: {time_limit: 30, rate: 100, nemesis: kill-leader}
    matrix:                      # every combination of these values is a cell
      acks: [1, all]
      min_insync: [1, 2]
    exclude: [{acks: 1, min_insync: 1}]      # drop cells matching all these values
    include: [{acks: all, min_insync: 2, unclean: true}]   # extra cells (over base)

Keys of base, matrix, exclude and include are `kchaos run` options, spelled
with `_` or `-` (`min_insync`, `min-insync`, `time_limit`, `nemesis`, ...);
a list of nemeses may be a YAML list. Every cell is parsed by the `run`
option parser and preflighted before anything runs, and an error names the
file, the line and the key (`suite.yaml:9: matrix.acks: ...`).
"""
from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from kchaos.core.config import ConfigError, TestConfig
from kchaos.core.yaml_doc import SpecDoc
from kchaos.harness.suites.spec_files import SHORT, Cell, cell_config, head, preflight, run_options, show

TOP_KEYS = ("name", "description", "seed", "repeat", "base", "matrix", "exclude", "include")


class SuiteError(ConfigError):
    """A bad suite file: the message starts with `file:line:` and names the key."""


@dataclass(frozen=True)
class Suite:
    """A parsed, validated suite file."""

    name: str
    description: str
    path: Path
    text: str
    seed: int | None
    repeat: int
    cells: tuple[Cell, ...]

    def run_seed(self, seed: int, cell: Cell, rep: int) -> int:
        """The seed of repetition `rep` of `cell` under suite seed `seed` (an explicit cell seed wins)."""
        fixed = dict(cell.options).get("seed")
        if fixed is not None:
            return int(fixed)
        digest = hashlib.sha256(f"{seed}/{cell.name}/{rep}".encode()).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF

    def on_hosts(self, hosts: str | None) -> Suite:
        """This suite with every cell run on the machines of hosts file `hosts` (None: unchanged)."""
        if not hosts:
            return self
        from kchaos.core.hosts import load_hosts

        path = str(load_hosts(hosts).path)  # checked now: a bad file is exit 3 before any run starts
        cells = tuple(replace(c, options=(*((k, v) for k, v in c.options if k != "hosts"), ("hosts", path)))
                      for c in self.cells)
        return replace(self, cells=cells)

    def config(self, cell: Cell, seed: int, store: Path, spark_master: str) -> TestConfig:
        """The TestConfig of one repetition of `cell` (not yet preflighted); SuiteError if its options do not parse."""
        return cell_config(cell, seed, store, spark_master, _fail)


def _fail(msg: str) -> NoReturn:
    raise SuiteError(msg)


def _slug(index: int, params: dict[str, Any]) -> str:
    parts = [f"{SHORT.get(k, k)}-{show(v)}".lstrip("-") for k, v in params.items()]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{index:02d}_" + "_".join(parts)).strip("-_") or f"{index:02d}"
    if len(name) > 64:
        name = name[:55] + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name


def load_suite(path: Path) -> Suite:
    """Parse and validate a suite file; raise SuiteError (`file:line: key: problem`) on any problem.

    Every cell is checked as `kchaos run` would check it (options, nemesis
    names, combinations such as min_insync > rf) before anything is created.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(f"{path}: cannot read suite file ({e.strerror if isinstance(e, OSError) else e})") from None
    doc = SpecDoc(path, text, SuiteError)
    d, name = head(doc, path, "suite", TOP_KEYS)
    seed = d.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        doc.fail(("seed",), f"must be a non-negative integer, got {seed!r}")
    repeat = d.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= 1000:
        doc.fail(("repeat",), f"must be an integer 1..1000, got {repeat!r}")
    base = run_options(doc, ("base",), d.get("base"))
    matrix = run_options(doc, ("matrix",), d.get("matrix"), lists=True)
    combos = [dict(zip(matrix, vals)) for vals in itertools.product(*matrix.values())] if matrix else [{}]
    for key in ("exclude", "include"):
        if d.get(key) is not None and not isinstance(d[key], list):
            doc.fail((key,), "must be a list of mappings of run options")
    for i, ex in enumerate(d.get("exclude") or []):
        ex = run_options(doc, ("exclude", i), ex)
        unknown = [k for k in ex if k not in matrix]
        if unknown:
            doc.fail(("exclude", i), f"{', '.join(unknown)} is not a matrix key, so it excludes nothing")
        kept = [c for c in combos if not all(show(c[k]) == show(v) for k, v in ex.items())]
        if len(kept) == len(combos):
            doc.fail(("exclude", i), "matches no cell of the matrix")
        combos = kept
    made: list[tuple[tuple, dict[str, Any]]] = [(("matrix",), c) for c in combos if matrix or not d.get("include")]
    made += [(("include", i), run_options(doc, ("include", i), inc)) for i, inc in enumerate(d.get("include") or [])]
    if not made:
        doc.fail(("matrix",), "the suite has no cells (every cell was excluded)")
    cells: list[Cell] = []
    seen: dict[tuple, str] = {}
    for i, (where, params) in enumerate(made):
        opts = {**base, **params}
        cell = Cell(i, _slug(i, params), tuple(params.items()), tuple(opts.items()))
        same = tuple(sorted((k, show(v)) for k, v in opts.items()))
        if same in seen:
            doc.fail(where, f"cell {cell.label()} is the same configuration as cell {seen[same]}")
        seen[same] = cell.label()
        preflight(doc, where, cell, base, matrix)
        cells.append(cell)
    return Suite(name=name, description=str(d.get("description") or ""), path=path.resolve(), text=text,
                 seed=seed, repeat=repeat, cells=tuple(cells))
