""""Did you mean": the known names closest to a mistyped one, for one-line errors."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_names(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` names of `known` that `word` is probably a typo of, closest first (may be empty)."""
    known = list(dict.fromkeys(known))
    # A name typed as its start (--time for --time-limit, --max-in for --max-in-flight) is the surest guess, and one
    # difflib misses or ranks below names that merely look alike.
    starts = [k for k in known if len(word) >= 3 and k.startswith(word) and k != word]
    if starts:
        return starts[:n]
    return difflib.get_close_matches(word, known, n=n, cutoff=0.6)


def did_you_mean(word: str, known: Iterable[str], n: int = 3) -> str:
    """" (did you mean X?)" or " (did you mean X or Y?)" for `word` among `known`, or "" when none is close."""
    close = close_names(word, known, n)
    if not close:
        return ""
    return f" (did you mean {', '.join(close[:-1]) + ' or ' + close[-1] if len(close) > 1 else close[0]}?)"
