"""Plots drawn again only when what they show changed: the report being rewritten is the cache.

A run's report.html is rewritten by every `kchaos check` and `explain` of the run, and by the run itself; most
often nothing a plot shows has changed, and drawing the plots is most of the rewrite's time. A plot function
wrapped in `cached` returns `Png` bytes that carry a key: a hash of the function, its arguments (pickled) and
the plotting code and matplotlib's version. The page embeds each plot with its key (`data-key`). While
`reusing(report)` is active, a plot whose key is in that page already is taken from it rather than drawn: the
same function of the same arguments by the same code, so the same image. The last plots this process drew within
`keeping` are taken the same way, in or out of that block (a run's process draws them ahead, beside its check).
Arguments that cannot be pickled only miss the cache.
"""
from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import io
import pickle
import re
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ParamSpec

import matplotlib

__all__ = ["Png", "cached", "keeping", "reusing"]

P = ParamSpec("P")
_EMBEDDED = re.compile(rb'data-key="([0-9a-f]{40})" src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
_previous: ContextVar[dict[str, bytes] | None] = ContextVar("previous_plots", default=None)
# The plots drawn within `keeping` in this process, the last few, by key: a run's process draws its report's plots
# beside the check (`predraw`), then writes the page with them.
_keeping: ContextVar[bool] = ContextVar("keeping_plots", default=False)
_DRAWN: OrderedDict[str, bytes] = OrderedDict()
_DRAWN_LOCK = threading.Lock()
MAX_DRAWN = 32


class Png(bytes):
    """PNG bytes and the key of what they show (None: not keyed, drawn again every time)."""

    key: str | None = None


@functools.cache
def _code() -> bytes:
    """What a plot's pixels depend on besides its arguments: the plotting modules' source and matplotlib's version."""
    h = hashlib.blake2b(matplotlib.__version__.encode(), digest_size=20)
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.digest()


class _Pickler(pickle.Pickler):
    """Pickles for a key, not to load again: a read-only mapping as its items, a set in sorted order (when its items
    sort), so that equal arguments give equal bytes in any process."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.MappingProxyType):
            return dict, (dict(obj),)
        if isinstance(obj, (set, frozenset)):
            try:
                return type(obj), (sorted(obj),)
            except TypeError:
                return NotImplemented
        return NotImplemented


def _key(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> str | None:
    buf = io.BytesIO()
    try:
        pickler = _Pickler(buf, protocol=5)
        # No memo: equal arguments give equal bytes whether or not some of them are one object (the windows of
        # results.json, or the same windows computed from the history and shared with the fault catalogue).
        pickler.fast = True
        pickler.dump((fn.__module__, fn.__qualname__, args, sorted(kwargs.items())))
    except Exception:  # a lambda, a generator, a file: such a plot is drawn every time
        return None
    return hashlib.blake2b(buf.getbuffer(), key=_code(), digest_size=20).hexdigest()


def cached(fn: Callable[P, bytes]) -> Callable[P, Png]:
    """`fn`, a pure function from its arguments to PNG bytes, returning them keyed, and taken from the page of
    `reusing` when that page holds the same key."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Png:
        key = _key(fn, args, kwargs)
        previous = _previous.get()
        data = previous.get(key) if previous is not None and key is not None else None
        if data is None and key is not None:
            with _DRAWN_LOCK:
                data = _DRAWN.get(key)
        if data is None:
            data = fn(*args, **kwargs)
            if key is not None and _keeping.get():
                with _DRAWN_LOCK:
                    _DRAWN[key] = data
                    while len(_DRAWN) > MAX_DRAWN:
                        _DRAWN.popitem(last=False)
        png = Png(data)
        png.key = key
        return png
    return wrapper


@contextlib.contextmanager
def reusing(page: Path) -> Iterator[None]:
    """Within this block, plots whose keys `page` (an earlier report.html; missing or unreadable: none) embeds
    are taken from it."""
    found: dict[str, bytes] = {}
    try:
        for key, data in _EMBEDDED.findall(Path(page).read_bytes()):
            found[key.decode()] = base64.b64decode(data, validate=True)
    except (OSError, binascii.Error):
        found = {}
    token = _previous.set(found)
    try:
        yield
    finally:
        _previous.reset(token)


@contextlib.contextmanager
def keeping() -> Iterator[None]:
    """Within this block, the plots drawn are kept in this process (the last MAX_DRAWN), where any later plot of
    the same key is taken from."""
    token = _keeping.set(True)
    try:
        yield
    finally:
        _keeping.reset(token)
