"""Lines a person reads on a console or in a log: short, broken where a sentence has a place to break."""
from __future__ import annotations

import re

__all__ = ["LINE_WIDTH", "short_lines"]

LINE_WIDTH = 150  # what a line of the console or a log holds at most, where a sentence has a place to break


def short_lines(text: str, width: int = LINE_WIDTH) -> list[str]:
    """`text` in lines of at most `width` characters: broken after "; " between clauses and, in a clause still
    longer, after ", ". Every word is kept and in order; a piece with no such break stays whole, however long."""
    pieces: list[str] = []
    for clause in re.split(r"(?<=;) ", text):
        pieces += re.split(r"(?<=,) ", clause) if len(clause) > width else [clause]
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return lines
