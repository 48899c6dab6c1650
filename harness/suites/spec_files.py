"""What suite and scenario files share: the header check, run options as `kchaos run` parses them, the cell (one
configuration of run options) and its preflight. The YAML document with line numbers is `SpecDoc` in
`kchaos.core.yaml_doc`.

Every error names the file, the line and the key (`suite.yaml:9: matrix.acks: ...`) and is raised as the
error class the document was opened with (a ConfigError: the command line exits 3).
"""
from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from kchaos.core.config import ConfigError, TestConfig
from kchaos.core.suggest import did_you_mean
from kchaos.core.yaml_doc import SpecDoc, option_key
from kchaos.harness.options import add_run_options, config_from_args, for_its_workload

# Chosen by the suite itself, or by `kchaos suite` options.
NOT_IN_SUITE = ("name", "store", "keep", "spark_master", "spark_driver_host")
# Run options that name a file: taken from the suite or scenario file's directory when relative.
PATH_OPTIONS = ("hosts",)
SHORT = {"min_insync": "misr", "idempotence": "idem", "nemesis": ""}


def show(v: Any) -> str:
    """A run option's value as a label shows it: lists joined by commas, booleans in lower case."""
    return ",".join(map(str, v)) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else str(v)


@dataclass(frozen=True)
class Cell:
    """One configuration of the matrix: its name (a test name), matrix values and every option set."""

    index: int
    name: str
    params: tuple[tuple[str, Any], ...]  # the matrix/include values that make this cell, in file order
    options: tuple[tuple[str, Any], ...]  # base + params

    def label(self) -> str:
        """`acks=1 min_insync=2` (or "base" for a cell without parameters)."""
        return " ".join(f"{k}={show(v)}" for k, v in self.params) or "base"

    def short(self) -> str:
        """A terse label for tables: `acks=all misr=2 unclean kill-leader`."""
        def one(k: str, v: Any) -> str:
            if k == "nemesis":
                return show(v)
            if isinstance(v, bool):
                return SHORT.get(k, k) if v else f"no-{SHORT.get(k, k)}"
            return f"{SHORT.get(k, k)}={show(v)}"
        return " ".join(one(k, v) for k, v in self.params) or "base"


def head(doc: SpecDoc, path: Path, kind: str, keys: tuple[str, ...]) -> tuple[dict[str, Any], str]:
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


def run_options(doc: SpecDoc, where: tuple, value: Any, *, lists: bool = False) -> dict[str, Any]:
    """The mapping of run options at `where` (each value a list of values if `lists`), every value parsed as
    `kchaos run` would parse it; fails on the key or value at fault."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        doc.fail(where, "must be a mapping of run options")
    acts = _actions()
    out: dict[str, Any] = {}
    for raw, v in value.items():
        key = option_key(raw)
        if key in NOT_IN_SUITE:
            doc.fail(where + (raw,), "cannot be set in a suite "
                     f"({'kchaos suite chooses it' if key != 'spark_master' else 'use kchaos suite --spark-master'})")
        if key not in acts:
            doc.fail(where + (raw,), f"unknown run option{did_you_mean(key, acts)}")
        if key in out:
            doc.fail(where + (raw,), f"given twice (as {raw!r} and another spelling)")
        if lists:
            if not isinstance(v, list) or not v:
                doc.fail(where + (raw,), "must be a non-empty list of values")
            for i, item in enumerate(v):
                parse_run_options({key: item}, functools.partial(doc.fail, where + (raw, i)))
        else:
            parse_run_options({key: v}, functools.partial(doc.fail, where + (raw,)))
        if key in PATH_OPTIONS:
            v = [str(doc.dir / Path(x).expanduser()) for x in v] if lists else str(doc.dir / Path(v).expanduser())
        out[key] = v
    return out


class _Raising(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """`kchaos run`'s own option parser, raising ConfigError instead of exiting."""
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
        elif isinstance(act, argparse._AppendAction):  # a repeatable option: one value or a list of them
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(x, str) for x in values):
                raise ConfigError(f"must be a string or a list of strings, got {value!r}")
            argv += [f"{flag}={x}" for x in values]
        elif isinstance(value, list):
            if key != "nemesis" or not value or not all(isinstance(x, str) for x in value):
                raise ConfigError(f"must be one value, got the list {value!r}")
            argv += [flag, ",".join(value)]
        else:
            argv.append(f"{flag}={value}")
    return argv


def parse_run_options(options: dict[str, Any], fail: Callable[[str], NoReturn]) -> argparse.Namespace:
    """`options` (dest -> value, as a file gives them) parsed by `kchaos run`'s parser; `fail(message)` if not."""
    try:
        return _parser().parse_args(_argv(options))
    except ConfigError as e:
        fail(str(e))


def cell_config(cell: Cell, seed: int, store: Path, spark_master: str,
                fail: Callable[[str], NoReturn]) -> TestConfig:
    """The TestConfig of one run of `cell` (not yet preflighted); `fail(message)` if its options do not parse."""
    args = for_its_workload(parse_run_options(dict(cell.options), fail))
    args.name, args.store, args.spark_master, args.seed = cell.name, str(store), spark_master, seed
    return config_from_args(args)


def preflight(doc: SpecDoc, where: tuple, cell: Cell, base: dict[str, Any], matrix: dict[str, list]) -> None:
    """Check `cell` as `kchaos run` would; blame the base when it fails the same way on its own, else the one value
    of the cell that fails on its own, else the whole cell."""
    try:
        _check(cell)
    except ConfigError as e:
        if _fails(base) == str(e):
            _blame_base(doc, base, str(e))
        for k, v in cell.params:
            try:
                _check(Cell(0, "x", ((k, v),), tuple({**base, k: v}.items())))
            except ConfigError as alone:
                path = where + ((k, next(i for i, x in enumerate(matrix[k]) if x == v)) if where == ("matrix",)
                                else (k,))
                doc.fail(path, str(alone))
        doc.fail(where, f"cell {cell.label()}: {e}")


def _fails(options: dict[str, Any]) -> str | None:
    """Why a cell of only these options fails its check, or None."""
    try:
        _check(Cell(0, "x", (), tuple(options.items())))
    except ConfigError as e:
        return str(e)
    return None


def _blame_base(doc: SpecDoc, base: dict[str, Any], message: str) -> NoReturn:
    """Fail at the base's key that fails on its own, else at the base's last key that takes the error away, else
    at the base itself."""
    for k, v in base.items():
        if _fails({k: v}) is not None:
            doc.fail(("base", k), message)
    for k in reversed(base):
        if _fails({x: v for x, v in base.items() if x != k}) is None:
            doc.fail(("base", k), message)
    doc.fail(("base",), message)


def _raise(msg: str) -> NoReturn:
    raise ConfigError(msg)


def check_cell(cell: Cell) -> None:
    """Raise ConfigError, as `kchaos run` would, when `cell`'s options cannot run."""
    _check(cell)


def _check(cell: Cell) -> None:
    # Imported when a file is checked, not when it is imported: the builder pulls in Docker and the Kafka client.
    from kchaos.harness.build import preflight as run_preflight

    # The store is checked once by the suite runner; here only the cell's own options are.
    run_preflight(cell_config(cell, 0, Path("/tmp"), "local[*]", _raise))
