"""Plots drawn again only when what they show changed: the report being rewritten is the cache.

A run's report.html is rewritten by every `kchaos check` and `explain` of the run, and by the run itself; most
often nothing a plot shows has changed, and drawing the plots is most of the rewrite's time. A plot function
wrapped in `cached` returns `Png` bytes that carry a key: a hash of the function, its arguments (pickled) and
the plotting code and matplotlib's version. The page embeds each plot with its key (`data-key`). While
`reusing(report)` is active, a plot whose key is in that page already is taken from it rather than drawn: the
same function of the same arguments by the same code, so the same image. Arguments that cannot be pickled only
miss the cache.
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
import types
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ParamSpec

import matplotlib

__all__ = ["Png", "cached", "reusing"]

P = ParamSpec("P")
_EMBEDDED = re.compile(rb'data-key="([0-9a-f]{40})" src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
_previous: ContextVar[dict[str, bytes] | None] = ContextVar("previous_plots", default=None)


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
        _Pickler(buf, protocol=5).dump((fn.__module__, fn.__qualname__, args, sorted(kwargs.items())))
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
        png = Png(fn(*args, **kwargs) if data is None else data)
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
