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

import argparse
import functools
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

import yaml

from harness.config import ConfigError, TestConfig

TOP_KEYS = ("name", "description", "seed", "repeat", "base", "matrix", "exclude", "include")
# Chosen by the suite itself, or by `kchaos suite` options.
NOT_IN_SUITE = ("name", "store", "keep", "spark_master", "spark_driver_host")


class SuiteError(ConfigError):
    """A bad suite file: the message starts with `file:line:` and names the key."""


@dataclass(frozen=True)
class Cell:
    """One configuration of the matrix: its name (a test name), matrix values and every option set."""

    index: int
    name: str
    params: tuple[tuple[str, Any], ...]  # the matrix/include values that make this cell, in file order
    options: tuple[tuple[str, Any], ...]  # base + params

    def label(self) -> str:
        """`acks=1 min_insync=2` (or "base" for a cell without parameters)."""
        return " ".join(f"{k}={_show(v)}" for k, v in self.params) or "base"

    def short(self) -> str:
        """A terse label for tables: `acks=all misr=2 unclean kill-leader`."""
        def one(k: str, v: Any) -> str:
            if k == "nemesis":
                return _show(v)
            if isinstance(v, bool):
                return SHORT.get(k, k) if v else f"no-{SHORT.get(k, k)}"
            return f"{SHORT.get(k, k)}={_show(v)}"
        return " ".join(one(k, v) for k, v in self.params) or "base"


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

    def config(self, cell: Cell, seed: int, store: Path, spark_master: str) -> TestConfig:
        """The TestConfig of one repetition of `cell` (not yet preflighted)."""
        from harness.cli import config_from_args

        args = _parse(dict(cell.options), _fail)
        args.name, args.store, args.spark_master, args.seed = cell.name, str(store), spark_master, seed
        return config_from_args(args)


def _show(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else str(v)


def _fail(msg: str) -> NoReturn:
    raise SuiteError(msg)


class _Raising(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """`kchaos run`'s own option parser, raising ConfigError instead of exiting."""
    from harness.cli import add_run_options

    p = _Raising(prog="suite", add_help=False)
    add_run_options(p)
    return p


def _actions() -> dict[str, argparse.Action]:
    return {a.dest: a for a in _parser()._actions if a.option_strings and a.dest not in NOT_IN_SUITE}


def _argv(options: dict[str, Any]) -> list[str]:
    acts = _actions()
    argv: list[str] = []
    for key, value in options.items():
        act = acts[key]
        flag = act.option_strings[0]
        if isinstance(act, argparse.BooleanOptionalAction):
            if not isinstance(value, bool):
                raise ConfigError(f"must be true or false, got {value!r}")
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (dict, bool)) or value is None:
            raise ConfigError(f"must be a number or a string, got {value!r}")
        elif isinstance(value, list):
            if key != "nemesis" or not value or not all(isinstance(x, str) for x in value):
                raise ConfigError(f"must be one value, got the list {value!r}")
            argv += [flag, ",".join(value)]
        else:
            argv.append(f"{flag}={value}")
    return argv


def _parse(options: dict[str, Any], fail: Callable[[str], NoReturn]) -> argparse.Namespace:
    try:
        return _parser().parse_args(_argv(options))
    except ConfigError as e:
        fail(str(e))


class _Lines:
    """Plain data from a YAML document plus the line of every key path; duplicate keys are errors."""

    def __init__(self, path: Path, text: str):
        self.file = path.name
        self.lines: dict[tuple, int] = {}
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{self.file}:{mark.line + 1}" if mark else self.file
            raise SuiteError(f"{where}: not valid YAML: {getattr(e, 'problem', None) or e}") from None
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, path: tuple) -> None:
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                if k.value in seen:
                    self.fail(path + (k.value,), "appears twice", line=k.start_mark.line + 1)
                seen.add(k.value)
                for key in {k.value, _key(k.value)}:  # errors name options as min_insync, whatever the spelling
                    self._walk(v, path + (key,))
                    self.lines[path + (key,)] = k.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, path + (i,))

    def fail(self, path: tuple, msg: str, line: int | None = None) -> NoReturn:
        """Raise SuiteError `file:line: key.path: msg`, with the line of `path` or its nearest parent."""
        if line is None:
            line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), 1)
        name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        raise SuiteError(f"{self.file}:{line}: {name + ': ' if name else ''}{msg}")


def _head(doc: _Lines, path: Path, kind: str, keys: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The document as a mapping with only `keys`, and its name (default: the file name without .yaml)."""
    d = doc.data
    if not isinstance(d, dict):
        doc.fail((), f"a {kind} file is a mapping with keys " + ", ".join(keys))
    for k in d:
        if k not in keys:
            doc.fail((k,), f"unknown key; a {kind} has {', '.join(keys)}")
    name = d.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name):
        doc.fail(("name",), f"{name!r} must be 1-64 of letters, digits, '.', '_' or '-'")
    return d, name


def _key(raw: Any) -> str:
    return str(raw).replace("-", "_")


def _options(doc: _Lines, where: tuple, value: Any, *, lists: bool = False) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        doc.fail(where, "must be a mapping of run options")
    acts = _actions()
    out: dict[str, Any] = {}
    for raw, v in value.items():
        key = _key(raw)
        if key in NOT_IN_SUITE:
            doc.fail(where + (raw,), f"cannot be set in a suite ({'kchaos suite chooses it' if key != 'spark_master' else 'use kchaos suite --spark-master'})")
        if key not in acts:
            close = [k for k in acts if k.startswith(key[:4])][:3]
            doc.fail(where + (raw,), f"unknown run option{' (did you mean ' + ', '.join(close) + '?)' if close else ''}")
        if key in out:
            doc.fail(where + (raw,), f"given twice (as {raw!r} and another spelling)")
        if lists:
            if not isinstance(v, list) or not v:
                doc.fail(where + (raw,), "must be a non-empty list of values")
            for i, item in enumerate(v):
                _parse({key: item}, lambda m, p=where + (raw, i): doc.fail(p, m))
        else:
            _parse({key: v}, lambda m, p=where + (raw,): doc.fail(p, m))
        out[key] = v
    return out


SHORT = {"min_insync": "misr", "idempotence": "idem", "nemesis": ""}


def _slug(index: int, params: dict[str, Any]) -> str:
    parts = [f"{SHORT.get(k, k)}-{_show(v)}".lstrip("-") for k, v in params.items()]
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
    doc = _Lines(path, text)
    d, name = _head(doc, path, "suite", TOP_KEYS)
    seed = d.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        doc.fail(("seed",), f"must be a non-negative integer, got {seed!r}")
    repeat = d.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= 1000:
        doc.fail(("repeat",), f"must be an integer 1..1000, got {repeat!r}")
    base = _options(doc, ("base",), d.get("base"))
    matrix = _options(doc, ("matrix",), d.get("matrix"), lists=True)
    combos = [dict(zip(matrix, vals)) for vals in itertools.product(*matrix.values())] if matrix else [{}]
    for key in ("exclude", "include"):
        if d.get(key) is not None and not isinstance(d[key], list):
            doc.fail((key,), "must be a list of mappings of run options")
    for i, ex in enumerate(d.get("exclude") or []):
        ex = _options(doc, ("exclude", i), ex)
        unknown = [k for k in ex if k not in matrix]
        if unknown:
            doc.fail(("exclude", i), f"{', '.join(unknown)} is not a matrix key, so it excludes nothing")
        kept = [c for c in combos if not all(_show(c[k]) == _show(v) for k, v in ex.items())]
        if len(kept) == len(combos):
            doc.fail(("exclude", i), "matches no cell of the matrix")
        combos = kept
    made: list[tuple[tuple, dict[str, Any]]] = [(("matrix",), c) for c in combos if matrix or not d.get("include")]
    made += [(("include", i), _options(doc, ("include", i), inc)) for i, inc in enumerate(d.get("include") or [])]
    if not made:
        doc.fail(("matrix",), "the suite has no cells (every cell was excluded)")
    cells: list[Cell] = []
    seen: dict[tuple, str] = {}
    for i, (where, params) in enumerate(made):
        opts = {**base, **params}
        cell = Cell(i, _slug(i, params), tuple(params.items()), tuple(opts.items()))
        same = tuple(sorted((k, _show(v)) for k, v in opts.items()))
        if same in seen:
            doc.fail(where, f"cell {cell.label()} is the same configuration as cell {seen[same]}")
        seen[same] = cell.label()
        _preflight(doc, where, cell, base, matrix)
        cells.append(cell)
    return Suite(name=name, description=str(d.get("description") or ""), path=path.resolve(), text=text,
                 seed=seed, repeat=repeat, cells=tuple(cells))


def _preflight(doc: _Lines, where: tuple, cell: Cell, base: dict[str, Any], matrix: dict[str, list]) -> None:
    """Check `cell` as `kchaos run` would; blame the one value that fails on its own, else the whole cell."""
    try:
        _check(cell)
    except ConfigError as e:
        for k, v in cell.params:
            try:
                _check(Cell(0, "x", ((k, v),), tuple({**base, k: v}.items())))
            except ConfigError as alone:
                path = where + ((k, next(i for i, x in enumerate(matrix[k]) if x == v)) if where == ("matrix",)
                                else (k,))
                doc.fail(path, str(alone))
        doc.fail(where, f"cell {cell.label()}: {e}")


def _check(cell: Cell) -> None:
    from harness.runner import preflight

    # The store is checked once by the suite runner; here only the cell's own options are.
    preflight(Suite("", "", Path(), "", 0, 1, (cell,)).config(cell, 0, Path("/tmp"), "local[*]"))
