"""The HTML of every page kchaos writes: Jinja2 templates in reports/templates/, autoescaped, one stylesheet.

Pages are self-contained: no scripts, no external stylesheets or fonts, images
embedded as data URIs, so a report opens from a CI artifact or an e-mail.
"""
from __future__ import annotations

import base64
import os
from numbers import Number
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup


def yes(b: Any) -> Any:
    """"yes" for True, "no" for False, anything else as it is."""
    return {True: "yes", False: "no"}.get(b, b)


# None prints as an en dash wherever a template prints a value.
ENV = Environment(loader=PackageLoader("kchaos.reports"), autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                  lstrip_blocks=True, keep_trailing_newline=True, finalize=lambda v: "–" if v is None else v)
ENV.filters.update(b64=lambda data: base64.b64encode(data).decode(), yes=yes)
ENV.tests["num"] = lambda v: isinstance(v, Number) and not isinstance(v, bool)


def render(template: str, **context: Any) -> str:
    """`template` (a file of reports/templates/) rendered with `context`; values are escaped unless Markup."""
    return ENV.get_template(template).render(**context)


def png(data: bytes, alt: str) -> str:
    """An <img> embedding PNG bytes as a data URI, as HTML text."""
    module = ENV.get_template("macros.html.j2").module
    return str(module.png(data, alt))  # type: ignore[attr-defined]  # jinja2's TemplateModule gets macros at run time


def write_page(path: Path, title: str, body: str = "", template: str = "page.html.j2", **context: Any) -> Path:
    """Write `template` rendered with `title`, `body` (HTML, inserted as it is) and `context` to `path`.

    The file is written whole (temporary file, then rename); returns the path.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render(template, title=title, body=Markup(body), **context), encoding="utf-8")
    os.replace(tmp, path)
    return path
