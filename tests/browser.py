"""Open a page in headless Chromium (Debian's `chromium`, driven by Playwright) and report what a reader would see.

`render(url)` loads the page, waits for it to settle and returns a `Rendered`:
console errors, uncaught page errors, failed requests and every <img> with its
natural size (0 means it did not load). Tests assert on these. One Chromium serves
every render of a test process, each page in a fresh browser context of its own (no
cookies, cache or storage shared): starting Chromium costs more than loading a page.
"""
from __future__ import annotations

import atexit
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM_ENV = "KCHAOS_CHROMIUM"


def chromium_path() -> str:
    """The Chromium binary: $KCHAOS_CHROMIUM, else `chromium` on PATH; fails the test when there is none."""
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium")
    if not path:
        pytest.fail("no chromium on PATH: run `make setup` (it installs Debian's chromium package)")
    return path


@dataclass
class Rendered:
    """What one page load showed."""

    title: str
    text: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    images: list[tuple[str, int, int]] = field(default_factory=list)  # (src, naturalWidth, naturalHeight)
    links: list[str] = field(default_factory=list)  # resolved href of every <a>

    @property
    def broken_images(self) -> list[str]:
        """Sources of images that did not load (natural size 0)."""
        return [src[:80] for src, w, h in self.images if w == 0 or h == 0]

    def assert_clean(self, min_images: int = 0) -> None:
        """Fail unless the page had no console or page errors, no failed requests and >= min_images loaded images."""
        assert not self.console_errors, self.console_errors
        assert not self.page_errors, self.page_errors
        assert not self.failed_requests, self.failed_requests
        assert not self.broken_images, self.broken_images
        assert len(self.images) >= min_images, f"{len(self.images)} images, wanted >= {min_images}"


_CHROMIUM: list = []  # [playwright, browser] once launched in this process


def _browser():
    """This process's Chromium, launched at its first use (again if it went away); closed at exit."""
    from playwright.sync_api import sync_playwright

    if _CHROMIUM and _CHROMIUM[1].is_connected():
        return _CHROMIUM[1]
    _close()
    pw = sync_playwright().start()
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    browser = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                 args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
    _CHROMIUM[:] = [pw, browser]
    return browser


@atexit.register
def _close() -> None:
    if _CHROMIUM:
        pw, browser = _CHROMIUM
        _CHROMIUM.clear()
        try:
            browser.close()
        finally:
            pw.stop()


def render(url: str | Path, timeout_ms: int = 30000) -> Rendered:
    """Load `url` (or a local file path) in headless Chromium and collect what happened."""
    if isinstance(url, Path):
        url = url.resolve().as_uri()
    context = _browser().new_context()
    try:
        page = context.new_page()
        console: list[str] = []
        errors: list[str] = []
        failed: list[str] = []
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: failed.append(f"{r.url[:120]}: {r.failure}"))
        response = page.goto(url, wait_until="load", timeout=timeout_ms)
        if response is not None and response.status >= 400:
            failed.append(f"{url}: HTTP {response.status}")
        page.wait_for_load_state("networkidle", timeout=timeout_ms)
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.currentSrc || e.src, e.naturalWidth, e.naturalHeight])")
        links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        return Rendered(title=page.title(), text=page.inner_text("body"), console_errors=console,
                        page_errors=errors, failed_requests=failed,
                        images=[(s, int(w), int(h)) for s, w, h in images], links=links)
    finally:
        context.close()
