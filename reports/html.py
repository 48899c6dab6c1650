"""HTML building blocks shared by every page kchaos writes: one stylesheet, tables, embedded PNG images.

Pages are self-contained: no scripts, no external stylesheets or fonts, images
embedded as data URIs, so a report opens from a CI artifact or an e-mail.
"""
from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5em auto;max-width:1200px;
     padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em} th,td{border:1px solid #ddd;padding:.25em .6em;
     text-align:left;vertical-align:top} th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.valid-true{background:#dff5df;color:#14601a} .valid-false{background:#fbe0e0;color:#8a1313}
.valid-unknown{background:#fff3cd;color:#7a5a00} .verdict{display:inline-block;padding:.15em .6em;border-radius:.3em;
     font-weight:600} .muted{color:#777} code{background:#f4f4f4;padding:0 .25em} img.plot{max-width:100%;
     display:block;margin:.6em 0;border:1px solid #eee} .scroll{overflow-x:auto}
"""


def esc(value: Any) -> str:
    """`value` as text safe inside HTML; None shows as an en dash."""
    return "–" if value is None else html.escape(str(value), quote=True)


def verdict_class(valid: Any) -> str:
    """CSS class for a verdict: valid-true, valid-false or valid-unknown."""
    return {True: "valid-true", False: "valid-false"}.get(valid, "valid-unknown")


def verdict(valid: Any) -> str:
    """A coloured badge for a verdict (True, False or anything else as unknown)."""
    label = {True: "valid", False: "INVALID"}.get(valid, "unknown")
    return f'<span class="verdict {verdict_class(valid)}">{label}</span>'


def png(data: bytes, alt: str) -> str:
    """An <img> embedding PNG bytes as a data URI."""
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def link(href: str, text: Any) -> str:
    """An <a> (href escaped)."""
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def _cell(v: Any) -> str:
    if isinstance(v, Raw):
        return f"<td>{v.html}</td>"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f'<td class="num">{esc(v)}</td>'
    return f"<td>{esc(v)}</td>"


class Raw:
    """A table cell or fragment that is already HTML (not escaped again)."""

    def __init__(self, html_text: str):
        self.html = html_text


def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None) -> str:
    """An HTML table of `rows` showing `columns` (numbers right-aligned, Raw cells verbatim)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in (headers or columns))
    body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in columns) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def page(title: str, body: str) -> str:
    """A complete HTML document with the shared stylesheet."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">'
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


def write_page(path: Path, title: str, body: str) -> Path:
    """Write `page(title, body)` to `path` whole (temporary file, then rename); return the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page(title, body), encoding="utf-8")
    os.replace(tmp, path)
    return path
