"""The run's fault catalogue: for each nemesis a run used, which op breaks, which mends, and its plot colours.

The runner writes it as `faults.json` in the run directory, before the
workload starts (docs/history.md). Checkers and reports read it from there,
so they need neither the nemesis registry nor anything it imports, and a run
directory alone is enough to check, explain and report on the run again.

Runs recorded before `faults.json` existed are described from the nemesis
specs their history names (`FaultCatalogue.from_history`), as the registry
described those nemeses then.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

__all__ = ["FAULTS_FILE", "FaultsError", "FaultKind", "FaultCatalogue", "write_faults", "read_faults", "run_faults"]

FAULTS_FILE = "faults.json"
Role = Literal["break", "mend"]

# The nemesis registry as it was before faults.json existed, for runs recorded then: each package's break op,
# and each break op's mend op (None: a one-shot fault) and colours. Never extended: later runs carry faults.json.
_LEGACY_BREAKS: dict[str, str] = {
    **dict.fromkeys(("kill", "kill-leader", "kill-controller"), "kill"),
    "stop": "stop", "pause": "pause", "rolling-restart": "roll",
    **dict.fromkeys(("partition-one", "partition-leader", "partition-controller", "partition-halves",
                     "partition-majorities-ring", "partition-bridge", "partition-oneway", "partition-client"),
                    "start-partition"),
    "flaky": "start-flaky",
    **dict.fromkeys(("power-fail", "power-fail-leader", "power-fail-all"), "power-fail"),
    "slow-follower": "start-slow", "stall-follower": "start-stall", "slow-disk": "start-slow-disk",
    "cpu-starve": "start-starve", "elect-unclean": "elect-unclean",
}
_LEGACY: dict[str, tuple[str | None, dict[str, str]]] = {
    "kill": ("start", {"kill": "#e15759", "start": "#59a14f"}),
    "stop": ("start", {"stop": "#f28e2b", "start": "#59a14f"}),
    "pause": ("resume", {"pause": "#b07aa1", "resume": "#59a14f"}),
    "roll": (None, {"roll": "#edc948"}),
    "start-partition": ("stop-partition", {"start-partition": "#4e79a7", "stop-partition": "#a0cbe8"}),
    "start-flaky": ("stop-flaky", {"start-flaky": "#4e79a7", "stop-flaky": "#a0cbe8"}),
    "power-fail": ("start", {"power-fail": "#000000", "start": "#59a14f"}),
    "start-slow": ("stop-slow", {"start-slow": "#76b7b2", "stop-slow": "#bab0ac"}),
    "start-stall": ("stop-stall", {"start-stall": "#499894", "stop-stall": "#bab0ac"}),
    "start-slow-disk": ("stop-slow-disk", {"start-slow-disk": "#9c755f", "stop-slow-disk": "#bab0ac"}),
    "start-starve": ("stop-starve", {"start-starve": "#ff9da7", "stop-starve": "#bab0ac"}),
    "elect-unclean": (None, {"elect-unclean": "#d37295"}),
}


class FaultsError(ValueError):
    """The run's faults.json exists but does not describe faults: one line naming the file and the problem."""


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

    @classmethod
    def from_history(cls, ops: Iterable[Mapping[str, Any]]) -> FaultCatalogue:
        """The catalogue of a run recorded before faults.json, from its nemesis lines (or fault windows).

        Every spec the ops name whose package (the spec before any ":") the
        registry had then is described as the registry described it; other
        specs are left out, as unknown.
        """
        kinds: dict[str, FaultKind] = {}
        for op in ops:
            spec = op.get("nemesis")
            if isinstance(spec, str) and spec not in kinds and (kind := _legacy_kind(spec)) is not None:
                kinds[spec] = kind
        return cls(tuple(kinds.values()))

    @classmethod
    def legacy(cls) -> FaultCatalogue:
        """Every package of the registry before faults.json existed, each under its own name."""
        return cls(tuple(_legacy_fault(name, breaks) for name, breaks in _LEGACY_BREAKS.items()))


def _legacy_kind(spec: str) -> FaultKind | None:
    breaks = _LEGACY_BREAKS.get(spec.partition(":")[0])
    if breaks is None:
        return None
    return _legacy_fault(spec, breaks)


def _legacy_fault(spec: str, breaks: str) -> FaultKind:
    mends, colors = _LEGACY[breaks]
    return FaultKind(spec, breaks, mends, colors)


def write_faults(run: Path, kinds: Iterable[FaultKind]) -> Path:
    """Write the run's catalogue as `run/faults.json`; return its path."""
    path = Path(run) / FAULTS_FILE
    path.write_text(FaultCatalogue(tuple(kinds)).to_json(), encoding="utf-8")
    return path


def read_faults(run: Path) -> FaultCatalogue | None:
    """The catalogue in `run/faults.json`; None when the run has none (it predates the file).

    FaultsError when the file is there but unreadable or not a catalogue.
    """
    path = Path(run) / FAULTS_FILE
    if not path.is_file():
        return None
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


def run_faults(run: Path | None, ops: Iterable[Mapping[str, Any]] = ()) -> FaultCatalogue:
    """The run's catalogue: `run/faults.json` when it exists, else derived from `ops` (its nemesis lines)."""
    found = read_faults(run) if run is not None else None
    return found if found is not None else FaultCatalogue.from_history(ops)
