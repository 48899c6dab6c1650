"""Lines a person reads on a console or in a log: short, broken where a sentence has a place to break."""
from __future__ import annotations

import re
import textwrap

__all__ = ["LINE_WIDTH", "short_lines"]

LINE_WIDTH = 150  # what a line of the console or a log holds at most, where a sentence has a place to break


def short_lines(text: str, width: int = LINE_WIDTH) -> list[str]:
    """`text` in lines of at most `width` characters: broken after "; " between clauses, in a clause still
    longer after ", ", and in a piece still longer between words. Every word is kept and in order; only a single
    word longer than `width` makes a longer line."""
    pieces: list[str] = []
    for clause in re.split(r"(?<=;) ", text):
        for piece in re.split(r"(?<=,) ", clause) if len(clause) > width else [clause]:
            pieces += textwrap.wrap(piece, width, break_long_words=False, break_on_hyphens=False) \
                if len(piece) > width else [piece]
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return lines
