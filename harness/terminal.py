"""Where what a person reads goes: a rich Console made for its stream, headings and progress.

On a terminal, output fits the terminal's width, has colour and shows a live progress bar. Anywhere
else (a file, a pipe, a CI log) nothing is wrapped or cut, no ANSI code is written unless colour was
asked for (`--color always`), and progress is one plain line every 10 s. `NO_COLOR` (set and not
empty) turns colour off unless `--color always`. A quiet console (`--quiet`) prints nothing; the
command line prints its verdict lines on a console of their own.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Literal, TextIO

from rich.console import Console

COLORS = ("auto", "always", "never")
PLAIN_EVERY_S = 10.0
# Off a terminal, a line or table is as wide as its content: rich needs some width, so it gets one no line reaches.
UNBOUNDED = 1_000_000


def is_tty(stream: TextIO) -> bool:
    """Whether `stream` is a terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, or not a real file
        return False


def make_console(stream: TextIO | None = None, *, color: str = "auto", quiet: bool = False) -> Console:
    """A Console writing to `stream` (default stderr) as the module docstring says: wrapped, coloured and live
    on a terminal; unwrapped, uncoloured (unless `color` is "always") and plain elsewhere; silent if `quiet`."""
    if color not in COLORS:
        raise ValueError(f"color must be one of {', '.join(COLORS)}, got {color!r}")
    stream = stream if stream is not None else sys.stderr
    tty = is_tty(stream)
    colored = color == "always" or (color == "auto" and tty and not os.environ.get("NO_COLOR"))
    system: Literal["auto", "standard"] | None = ("auto" if tty else "standard") if colored else None
    # soft_wrap: a terminal wraps long lines itself, so a path copied from it stays whole
    return Console(file=stream, force_terminal=tty, color_system=system, no_color=not colored, quiet=quiet,
                   width=None if tty else UNBOUNDED, soft_wrap=True, highlight=False)


def interactive(console: Console) -> bool:
    """Whether `console` may redraw: a terminal that is not quiet (a live bar, a rule across the screen)."""
    return console.is_terminal and not console.quiet and not console.is_dumb_terminal


def heading(console: Console, text: str) -> None:
    """A section heading: a rule across a terminal; elsewhere one plain line, as long as the text."""
    if interactive(console):
        console.rule(text, style="cyan")
    else:
        console.print(f"── {text}", markup=False, soft_wrap=True)


def track(console: Console, label: str, limit: float, stats: Callable[[], str], *,
          every: float = PLAIN_EVERY_S, tick: float = 0.5, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Wait `limit` seconds, showing `label`, the time and `stats()`: a live bar on a terminal, elsewhere
    one line every `every` seconds and one at the end."""
    start = clock()
    if interactive(console):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        cols = [TextColumn("[progress.description]{task.description}"), BarColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[stats]}")]
        with Progress(*cols, console=console, transient=False) as progress:
            task = progress.add_task(label, total=limit, stats="")
            while (elapsed := clock() - start) < limit:
                progress.update(task, completed=elapsed, stats=stats())
                sleep(tick)
            progress.update(task, completed=limit, stats=stats())
        return
    said = 0.0
    while (elapsed := clock() - start) < limit:
        if elapsed - said >= every:
            said = elapsed
            _plain(console, label, elapsed, limit, stats())
        sleep(min(tick, limit - elapsed))
    _plain(console, label, limit, limit, stats())


def _plain(console: Console, label: str, elapsed: float, limit: float, stats: str) -> None:
    console.print(f"{label} {elapsed:.0f}/{limit:.0f}s {stats}", markup=False, soft_wrap=True)
