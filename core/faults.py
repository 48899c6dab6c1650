"""The run's fault catalogue: for each nemesis a run used, which op breaks, which mends, and its plot colours.

The runner writes it as `faults.json` in the run directory, before the
workload starts (docs/history.md); the command line writes one beside a
history that has none, from the nemesis registry. Checkers and reports read it
from there, so they need neither the nemesis registry nor anything it
imports, and a run directory alone is enough to check, explain and report on
the run again. A catalogue is only ever read from faults.json
(`read_faults`) or built from `FaultKind`s by whoever knows the nemeses.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["FAULTS_FILE", "FaultsError", "FaultKind", "FaultCatalogue", "write_faults", "read_faults"]

FAULTS_FILE = "faults.json"
Role = Literal["break", "mend"]


class FaultsError(ValueError):
    """The run's faults.json does not describe its faults (missing, unreadable or malformed): one line naming the
    file and the problem."""


@dataclass(frozen=True)
class FaultKind:
    """One nemesis as a run saw it: its spec, the op that breaks, the op that mends, and colours by op.

    `nemesis` is the spec exactly as history lines name it ("kill:majority");
    `mends` is None for a one-shot fault (rolling-restart's `roll`,
    `elect-unclean`), which no later op undoes.
    """

    nemesis: str
    breaks: str
    mends: str | None = None
    colors: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "colors", MappingProxyType(dict(self.colors)))

    @property
    def color(self) -> str | None:
        """The colour its faults are drawn in: that of its break op (None when it has none)."""
        return self.colors.get(self.breaks)

    def role(self, f: str) -> Role | None:
        """"break" for its break op, "mend" for its mend op, None for any other op (such as "heal")."""
        if f == self.breaks:
            return "break"
        return "mend" if self.mends is not None and f == self.mends else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form, one entry of faults.json."""
        return {"nemesis": self.nemesis, "breaks": self.breaks, "mends": self.mends, "colors": dict(self.colors)}

    @classmethod
    def from_dict(cls, d: Any) -> FaultKind:
        """The inverse of `to_dict`; ValueError naming the first field that is wrong."""
        if not isinstance(d, dict):
            raise ValueError("an entry must be an object")
        for key in ("nemesis", "breaks"):
            if not isinstance(d.get(key), str) or not d[key]:
                raise ValueError(f"{key!r} must be a non-empty string")
        if d.get("mends") is not None and not isinstance(d["mends"], str):
            raise ValueError("'mends' must be a string or null")
        colors = d.get("colors") or {}
        if not isinstance(colors, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in colors.items()):
            raise ValueError("'colors' must map op names to colour strings")
        return cls(d["nemesis"], d["breaks"], d.get("mends"), colors)


@dataclass(frozen=True)
class FaultCatalogue:
    """Every nemesis of one run, looked up by the spec its history lines carry; each spec at most once."""

    kinds: tuple[FaultKind, ...] = ()

    def __post_init__(self) -> None:
        names = [k.nemesis for k in self.kinds]
        if len(set(names)) != len(names):
            raise ValueError(f"a nemesis is described twice: {sorted(n for n in set(names) if names.count(n) > 1)}")

    def get(self, spec: str | None) -> FaultKind | None:
        """The kind of the nemesis named `spec`, None when the run has no such nemesis."""
        return next((k for k in self.kinds if k.nemesis == spec), None) if spec else None

    def role(self, spec: str | None, f: str) -> Role | None:
        """What op `f` of nemesis `spec` does: "break", "mend", or None (unknown nemesis or op, "heal")."""
        kind = self.get(spec)
        return kind.role(f) if kind is not None else None

    @property
    def break_ops(self) -> frozenset[str]:
        """The op names that break something, whichever nemesis performs them."""
        return frozenset(k.breaks for k in self.kinds)

    def to_json(self) -> str:
        """faults.json's text: a JSON list, one kind a line (so diffs stay readable)."""
        return "[\n" + ",\n".join(json.dumps(k.to_dict()) for k in self.kinds) + "\n]\n"


def write_faults(run: Path, kinds: Iterable[FaultKind]) -> Path:
    """Write the run's catalogue as `run/faults.json`; return its path."""
    path = Path(run) / FAULTS_FILE
    path.write_text(FaultCatalogue(tuple(kinds)).to_json(), encoding="utf-8")
    return path


def read_faults(run: Path, nemesis: Iterable[Mapping[str, Any]]) -> FaultCatalogue:
    """The catalogue in `run/faults.json`; `nemesis` is the run's nemesis lines (or its fault windows).

    Without the file, a run whose lines name no nemesis gets the empty
    catalogue, which describes it exactly; for one whose lines name some,
    which of their ops break and which mend is unknown: FaultsError. FaultsError
    too when the file is unreadable or not a catalogue.
    """
    path = Path(run) / FAULTS_FILE
    if not path.is_file():
        named = sorted({spec for op in nemesis if isinstance(spec := op.get("nemesis"), str) and spec})
        if named:
            raise FaultsError(f"{path}: missing, so it is unknown which ops of {', '.join(named)} break something "
                              f"and which mend it")
        return FaultCatalogue()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FaultsError(f"{path}: unreadable ({e})") from None
    if not isinstance(data, list):
        raise FaultsError(f"{path}: must be a JSON list of {{nemesis, breaks, mends, colors}} entries")
    try:
        kinds = []
        for i, d in enumerate(data):
            try:
                kinds.append(FaultKind.from_dict(d))
            except ValueError as e:
                raise ValueError(f"entry {i}: {e}") from None
        return FaultCatalogue(tuple(kinds))
    except ValueError as e:
        raise FaultsError(f"{path}: {e}") from None
