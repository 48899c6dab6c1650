"""`kchaos serve` (reports/serve/server.py): pages of a hand-built store, content types, refusals, binding, Chromium."""
from __future__ import annotations

import contextlib
import http.client
import inspect
import json
import logging
import socket
import struct
import threading
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import render

from kchaos.reports.html import png, write_page
from kchaos.reports.serve.server import ServeError, make_server, serve, server_url

A = "20260101T100000.000Z"  # standalone run, INVALID, with report.html
B = "20260102T100000.000Z"  # standalone run, not checked (newest: latest)
S = "20260103T100000.000Z"  # suite
S0 = "20251231T100000.000Z"  # an older suite whose suite.json lists no runs
SECRET = "top secret outside the store"


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = zlib.compress(b"\x00\xff\x00\x00")  # one red pixel, filter byte 0
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", raw) + chunk(b"IEND", b""))


def _run(d: Path, name: str, acks: str, results: dict | None) -> Path:
    d.mkdir(parents=True)
    (d / "history.jsonl").write_text('{"type": "invoke", "f": "send", "process": 0, "value": 1}\n')
    (d / "test.json").write_text(json.dumps({"name": name, "seed": 7, "topic": {"min_insync": 2, "unclean": False},
                                             "producer": {"acks": acks, "idempotence": False},
                                             "nemesis": {"names": ["kill-leader"]}}))
    if results is not None:
        (d / "results.json").write_text(json.dumps(results, indent=2))
    return d


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("serve")
    root = base / "results"
    a = _run(root / "t-lossy" / A, "t-lossy", "1",
             {"valid": False, "counts": {"acked": 10, "lost": 3}, "examples": {"lost": list(range(5000))}})
    write_page(a / "report.html", "report", "<h1>report</h1>" + png(_png(), "a plot"))
    (a / "plot.png").write_bytes(_png())
    (a / "nodes" / "n1").mkdir(parents=True)
    (a / "nodes" / "n1" / "server.log").write_text("INFO started\n")
    (a / "nodes" / "n1" / "server.properties").write_text("broker.id=1\n")
    (a / "nodes" / "n1" / "server.log.1").write_text("INFO rotated\n")
    _run(root / "t-fresh" / B, "t-fresh", "all", None)
    (root / "latest").symlink_to(Path("t-fresh") / B)
    suite = root / "suites" / "nightly" / S
    _run(suite / "c0-r0", "nightly-c0", "all", {"valid": True, "counts": {"acked": 5, "lost": 0}})
    _run(suite / "c1-r0", "nightly-c1", "1", {"valid": False, "counts": {"acked": 6, "lost": 2}})
    (suite / "suite.json").write_text(json.dumps({
        "name": "nightly", "file": "nightly.yaml", "cells": [{"name": "00_acks-all"}, {"name": "01_acks-1"}]}))
    (suite / "progress.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [
        {"cell": "00_acks-all", "rep": 0, "seed": 1, "run": "c0-r0", "status": "done", "valid": True, "seconds": 9.0,
         "error": None},
        {"cell": "01_acks-1", "rep": 0, "seed": 2, "run": "c1-r0", "status": "done", "valid": False, "seconds": 9.0,
         "error": None}]))
    write_page(suite / "compare.html", "compare", "<h1>compare</h1>")
    (suite / "compare.csv").write_text("cell,valid\nacks=all,True\n")
    (suite / "report.xml").write_text('<?xml version="1.0"?><testsuite name="nightly"/>\n')
    (suite / "suite.yaml").write_text("name: nightly\n")
    adhoc = root / "suites" / "adhoc" / S0
    _run(adhoc / "cells" / "r0", "adhoc-r0", "all", {"valid": True, "counts": {"acked": 1, "lost": 0}})
    _run(adhoc / "cells" / "r1", "adhoc-r1", "all", None)
    (adhoc / "suite.json").write_text(json.dumps({"name": "adhoc"}))
    (root / "checks.csv").write_text("run,valid\n")
    (root / ".hidden.txt").write_text("hidden\n")
    (root / "to-hidden.txt").symlink_to(".hidden.txt")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (root / "escape.txt").symlink_to(outside / "secret.txt")
    (root / "escape").symlink_to(outside)
    return root


@contextlib.contextmanager
def serving(root: Path) -> Iterator[str]:
    """`kchaos serve` of `root` on a free port in a background thread; yields its URL without the final slash."""
    server = make_server(root, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_url(server).rstrip("/")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def url(store):
    with serving(store) as u:
        yield u


def get(url: str) -> tuple[int, str, str]:
    """(status, content type, body) without following redirects' errors into exceptions."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode(errors="replace")


def raw(url: str, target: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A request with `target` sent verbatim (urllib would normalise `..` away)."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.putrequest(method, target, skip_host=bool(headers and "Host" in headers))
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def rows(body: str) -> list[str]:
    return body.split("<tr>")[1:]


def test_index_lists_every_run_of_the_store_and_suites(url):
    status, ctype, body = get(url + "/")
    assert status == 200 and ctype == "text/html; charset=utf-8"
    # 2 runs on their own, 2 in the nightly suite, 2 in the adhoc one: a suite-only store once showed "Runs (0)"
    runs = body.split("<h2>Runs (6)</h2>")[1].split("<h2>")[0]
    by = {name: next(r for r in rows(runs) if f">{name}<" in r)
          for name in ("t-fresh", "t-lossy", "nightly-c0", "nightly-c1", "adhoc-r0", "adhoc-r1")}
    fresh, lossy = by["t-fresh"], by["t-lossy"]
    assert "not checked" in fresh and "2026-01-02 10:00:00Z" in fresh and "report.html" not in fresh
    # acks=1 lost 3 of 10: allowed, so "pass", on a red badge (30% lost)
    assert '<span class="verdict sev-severe">pass</span> severe' in lossy and ">10<" in lossy and ">3<" in lossy
    assert "kill-leader" in lossy and f"/t-lossy/{A}/report.html" in lossy and "<td>–</td>" in lossy  # no suite
    assert f'href="/suites/nightly/{S}/">nightly/{S}</a>' in by["nightly-c0"] and ">pass<" in by["nightly-c0"]
    assert f'href="/suites/adhoc/{S0}/"' in by["adhoc-r1"] and "not checked" in by["adhoc-r1"]
    assert "4 inside suites" in body
    suites = body.split("<h2>Suites (2)</h2>")[1].split("<h2>")[0]
    suite, adhoc = rows(suites)[1:]
    assert "adhoc" in adhoc and '<td class="num">2</td><td class="num">1</td><td class="num">0</td>' \
        '<td class="num">1</td>' in adhoc
    assert f'href="/suites/nightly/{S}/"' in suite and "nightly" in suite
    assert '<td class="num">2</td><td class="num">2</td><td class="num">0</td><td class="num">0</td>' in suite
    assert f"/suites/nightly/{S}/compare.html" in suite and f"/suites/nightly/{S}/report.xml" in suite
    assert 'href="/latest/"' in body
    assert "hidden" not in body and "escape" not in body and "secret" not in body


def test_suite_page_lists_its_runs(url):
    status, _, body = get(f"{url}/suites/nightly/{S}/")
    assert status == 200 and "Suite nightly" in body and "from <code>nightly.yaml</code>" in body
    table = body.split("<h2>Runs</h2>")[1].split("<h2>")[0]
    c0, c1 = rows(table)[1:]
    assert "00_acks-all" in c0 and ">done<" in c0 and '<span class="verdict sev-clean">pass</span>' in c0
    assert f"/suites/nightly/{S}/c0-r0/" in c0 and ">5<" in c0
    # recorded as valid: false before verdicts; acks=1 allows the loss: pass, red (2 of 6 lost)
    assert "01_acks-1" in c1 and '<span class="verdict sev-severe">pass</span>' in c1 and ">2<" in c1
    assert "2 runs: 2 pass, 0 fail, 0 unknown" in " ".join(body.split())
    for f in ("compare.html", "compare.csv", "report.xml", "suite.yaml"):
        assert f'href="/suites/nightly/{S}/{f}"' in body


def test_suite_without_a_run_list_shows_the_runs_below_it(url):
    body = get(f"{url}/suites/adhoc/{S0}/")[2]
    r0, r1 = rows(body.split("<h2>Runs</h2>")[1].split("<h2>")[0])[1:]
    assert f"/suites/adhoc/{S0}/cells/r0/" in r0 and ">pass<" in r0 and "not checked" in r1


def test_run_page_and_listings(url):
    status, _, body = get(f"{url}/t-lossy/{A}/")
    assert status == 200 and "min.insync.replicas" in body
    assert '<span class="verdict sev-severe">pass</span> severe' in body
    assert "observed, allowed: 3 lost (acks=1 promises no durability)" in body
    assert ">no<" in body and ">False<" not in body  # unclean election and idempotence, as report.html says them
    assert f'href="/t-lossy/{A}/nodes/"' in body and f'href="/t-lossy/{A}/report.html"' in body
    status, _, body = get(f"{url}/t-lossy/{A}/nodes/n1/")
    assert status == 200 and "server.log" in body and "server.properties" in body
    status, _, body = get(f"{url}/t-fresh/{B}/")
    assert "not checked" in body
    status, _, body = get(f"{url}/suites/")
    assert status == 200 and "<h1>Suites</h1>" in body  # a listing has a heading too


def test_results_are_reread_when_they_change(url, store):
    results = store / "t-fresh" / B / "results.json"
    try:
        results.write_text(json.dumps({"valid": True, "counts": {"acked": 42, "lost": 0}}))
        fresh = next(r for r in rows(get(url + "/")[2].split("<h2>Runs (6)</h2>")[1]) if ">t-fresh<" in r)
        assert ">pass<" in fresh and ">42<" in fresh
    finally:
        results.unlink()
    fresh = next(r for r in rows(get(url + "/")[2].split("<h2>Runs (6)</h2>")[1]) if ">t-fresh<" in r)
    assert "not checked" in fresh


@pytest.mark.parametrize("path, ctype", [
    (f"/t-lossy/{A}/report.html", "text/html; charset=utf-8"),
    (f"/t-lossy/{A}/plot.png", "image/png"),
    (f"/t-lossy/{A}/results.json", "application/json; charset=utf-8"),
    (f"/t-lossy/{A}/history.jsonl", "text/plain; charset=utf-8"),
    (f"/t-lossy/{A}/nodes/n1/server.log", "text/plain; charset=utf-8"),
    (f"/t-lossy/{A}/nodes/n1/server.properties", "text/plain; charset=utf-8"),
    (f"/t-lossy/{A}/nodes/n1/server.log.1", "text/plain; charset=utf-8"),
    (f"/suites/nightly/{S}/compare.csv", "text/csv; charset=utf-8"),
    (f"/suites/nightly/{S}/report.xml", "text/xml; charset=utf-8"),
    (f"/suites/nightly/{S}/suite.yaml", "text/plain; charset=utf-8"),
    ("/latest/test.json", "application/json; charset=utf-8"),
])
def test_files_are_served_with_their_content_type(url, store, path, ctype):
    status, headers, body = raw(url, path)
    assert status == 200 and headers["Content-Type"] == ctype
    real = (store / path.lstrip("/")).read_bytes()
    assert body == real and headers["Content-Length"] == str(len(real))
    status, headers, body = raw(url, path, "HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == str(len(real))


def test_redirects_to_directory_and_through_latest(url):
    status, headers, _ = raw(url, f"/t-lossy/{A}")
    assert status == 301 and headers["Location"] == f"/t-lossy/{A}/"
    status, headers, _ = raw(url, "/latest/")
    assert status == 302 and headers["Location"] == f"/t-fresh/{B}/"
    status, headers, _ = raw(url, "//evil.example")
    assert status == 404


@pytest.mark.parametrize("target", [
    "/../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    f"/t-lossy/{A}/../../../etc/passwd",
    "/t-lossy/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/escape.txt", "/escape/secret.txt", "/escape/",
    "/%00", "/%ff", "/a%5c..%5c..%5cetc/passwd", "//etc/passwd", "http://x/../etc/passwd",
])
def test_traversal_and_symlinks_out_of_the_store_are_refused(url, target):
    status, _, body = raw(url, target)
    assert status in (403, 404), (target, status)
    assert b"root:" not in body and SECRET.encode() not in body
    if target.startswith("/escape"):
        assert status == 403  # it exists, but outside the store


@pytest.mark.parametrize("target", ["/.hidden.txt", "/%2ehidden.txt", "/to-hidden.txt", "/./.hidden.txt"])
def test_hidden_files_are_refused(url, target):
    status, _, body = raw(url, target)
    assert status == 404 and b"hidden\n" != body


def test_only_get_and_head(url):
    status, headers, _ = raw(url, "/", "POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_foreign_host_header_is_refused(url):
    assert raw(url, "/", headers={"Host": "evil.example:8000"})[0] == 403
    assert raw(url, "/", headers={"Host": "localhost:8000"})[0] == 200


def test_favicon_is_no_content(url):
    assert raw(url, "/favicon.ico")[0] == 204


def test_requests_are_logged_not_printed(url, caplog, capfd):
    with caplog.at_level(logging.INFO, logger="kchaos.serve"):
        get(url + "/checks.csv")
    assert any("GET /checks.csv" in r.getMessage() for r in caplog.records if r.name == "kchaos.serve")
    assert "checks.csv" not in capfd.readouterr().err


def test_binds_loopback_by_default(store):
    assert inspect.signature(make_server).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(serve).parameters["host"].default == "127.0.0.1"
    server = make_server(store, port=0)
    try:
        host, port = server.server_address
        assert host == "127.0.0.1" and port > 0 and server_url(server) == f"http://127.0.0.1:{port}/"
    finally:
        server.server_close()


def test_port_in_use_and_bad_root_are_serve_errors(store, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ServeError, match=f"cannot listen on 127.0.0.1:{port}: address already in use"):
            make_server(store, port=port)
    with pytest.raises(ServeError, match="not a directory"):
        make_server(tmp_path / "missing", port=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ServeError, match="not a directory"):
        make_server(tmp_path / "file", port=0)
    with pytest.raises(ServeError, match="port must be"):
        make_server(store, port=70000)


def test_serve_says_the_url_and_closes_on_ctrl_c(store):
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        raise KeyboardInterrupt

    serve(store, port=0, say=say)
    assert said and said[0].startswith(f"serving {store} at http://127.0.0.1:")
    port = int(said[0].split("127.0.0.1:")[1].split("/")[0])
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # the listening socket was closed


def test_pages_render_cleanly_in_chromium(url):
    index = render(url + "/")
    index.assert_clean()
    assert index.title.startswith("kchaos results") and "t-lossy" in index.text
    assert index.links, "no links on the index"
    for href in sorted(set(index.links)):
        with urllib.request.urlopen(href, timeout=10) as r:
            assert r.status == 200, href
    suite = render(f"{url}/suites/nightly/{S}/")
    suite.assert_clean()
    assert "nightly" in suite.title and "00_acks-all" in suite.text
    report = render(f"{url}/t-lossy/{A}/report.html")
    report.assert_clean(min_images=1)
    run = render(f"{url}/latest/")
    run.assert_clean()
    assert "t-fresh" in run.title
