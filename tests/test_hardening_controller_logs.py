"""The daemon's logs are for operators. Client errors are counted, logged one line each at most,
rate-limited, never as tracebacks.

Before: 50 partial-body ``POST /target`` requests cut by SIGTERM printed 2,143 lines of "Exception in
ASGI application" tracebacks; a bad chunked encoding got its 400 and a full h11 ``LocalProtocolError``
traceback. The CLI runs as operators run it (a subprocess, its stderr read); the filter's rate limit
is checked with a fake clock.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_hardening_props import _env

pytest.importorskip("uvicorn")

T = 0.2


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], str, int, str]:
    tok = tmp_path / "tok"
    p = subprocess.Popen([sys.executable, "-m", "scidmz.cli", "control", "run", "testbed", "--set", f"period={T}",
                          "--target", "30M", "--api", "127.0.0.1:0", "--token-file", str(tok),
                          "--log", str(tmp_path / "log.jsonl")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path)
    deadline = time.monotonic() + 90
    while not tok.exists():
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise AssertionError(f"the daemon did not start: {p.communicate()[1]}")
        time.sleep(0.05)
    log = tmp_path / "log.jsonl"
    # Past start-up (JIT: on a cold numba cache the first step can outlast the start-up grace, and a run
    # of fallback periods only ends in exit 1), as operators see it: a period served by the policy.
    while not (log.exists() and '"fallback": false' in log.read_text()):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise AssertionError(f"the daemon did not run three periods: {p.communicate()[1]}")
        time.sleep(0.05)
    info = json.loads(tok.read_text())
    host, port = info["api"].rsplit(":", 1)
    return p, host, int(port), info["token"]


def _metrics(host: str, port: int, token: str) -> dict[str, float]:
    req = urllib.request.Request(f"http://{host}:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    text = urllib.request.urlopen(req, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("scidmz_http_client_errors_total{"):
            kind = line.split('kind="')[1].split('"')[0]
            out[kind] = float(line.rsplit(" ", 1)[1])
    return out


def _stop(p: subprocess.Popen[str]) -> tuple[str, float]:
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return err, time.monotonic() - t0


def _head(token: str, extra: str) -> bytes:
    return (f"POST /target HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n").encode()


def test_partial_bodies_cut_by_sigterm_are_not_a_flood_of_tracebacks(tmp_path: Path) -> None:
    p, host, port, token = _start(tmp_path)
    socks = []
    try:
        for _ in range(50):
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(_head(token, "Content-Length: 100\r\n") + b'{"target":')
            socks.append(s)
        time.sleep(1.0)
        err, took = _stop(p)
    finally:
        for s in socks:
            s.close()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and "Exception in ASGI" not in err, err[:2000]
    client = [ln for ln in lines if "HTTP client error" in ln]
    assert len(client) <= 2, lines  # one line per kind at most within the rate-limit interval
    assert len(lines) <= 4, lines  # the API's address, those, the summary
    assert p.returncode == 0 and took < 8, (p.returncode, took, err)


def test_a_bad_chunked_encoding_gets_400_one_line_and_a_count(tmp_path: Path) -> None:
    p, host, port, token = _start(tmp_path)
    try:
        answers = []
        for _ in range(5):
            with socket.create_connection((host, port), timeout=10) as s:
                s.sendall(_head(token, "Transfer-Encoding: chunked\r\n") + b"ZZZ\r\nabc\r\n0\r\n\r\n")
                answers.append(s.recv(200).split(b"\r\n")[0])
        time.sleep(0.3)
        counts = _metrics(host, port, token)
        # a partial body that times out: 408 and its own count
        with socket.create_connection((host, port), timeout=15) as s:
            s.sendall(_head(token, "Content-Length: 50\r\n") + b'{"tar')
            answers.append(s.recv(200).split(b"\r\n")[0])
        counts2 = _metrics(host, port, token)
    finally:
        err, _ = _stop(p)
    assert all(a == b"HTTP/1.1 400 Bad Request" for a in answers[:5]), answers
    assert answers[5].startswith(b"HTTP/1.1 408"), answers
    assert counts["bad_request"] >= 5, counts
    assert counts2["partial_body"] == counts.get("partial_body", 0) + 1, (counts, counts2)
    assert "Traceback" not in err and "LocalProtocolError" not in err, err[:2000]
    assert sum("HTTP client error (bad_request)" in ln for ln in err.splitlines()) == 1, err


class _View:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def client_error(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


def _record(msg: str, exc: BaseException | None = None, level: int = logging.ERROR) -> logging.LogRecord:
    ei: Any = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("uvicorn.error", level, __file__, 1, msg, (), ei)


def test_client_error_log_counts_everything_and_rate_limits_the_lines() -> None:
    import asyncio

    from scidmz.controller.api import ClientErrorLog

    now = [0.0]
    view = _View()
    f = ClientErrorLog(view, interval=10.0, clock=lambda: now[0])  # type: ignore[arg-type]
    kept = []
    for i in range(100):
        now[0] = i * 0.05
        r = _record("Exception in ASGI application\n", asyncio.CancelledError())
        if f.filter(r):
            kept.append(r)
    assert view.counts == {"disconnect": 100}
    assert len(kept) == 1 and kept[0].exc_info is None and "\n" not in kept[0].getMessage()
    now[0] = 20.0
    r = _record("Exception in ASGI application\n", asyncio.CancelledError())
    assert f.filter(r) and "99 more" in r.getMessage()
    r = _record("Invalid HTTP request received.", level=logging.WARNING)
    assert f.filter(r) and "bad_request" in r.getMessage()
    r = _record("Exception in ASGI application\n", KeyError("boom"))
    assert f.filter(r) and "app_error" in r.getMessage() and "KeyError" in r.getMessage() and r.exc_info is None
    assert f.filter(_record("debug", level=logging.DEBUG))  # below WARNING: untouched, uncounted
    assert view.counts == {"disconnect": 101, "bad_request": 1, "app_error": 1}
