"""``AgentClient``: what a controller uses to drive a ``scidmz agent`` on a DTN host.

It lives with the actuators (it sets a rate on a remote element, as the OVS
client does) so that the hardware plant, below the agent in the layers, can
use it; ``scidmz.agent.client`` re-exports it.

``AgentClient("http://10.0.0.7:8643", "/etc/scidmz/agent.token")``: the URL of
the agent's management API and a copy of its token file. ``set_rate(bps)``
grants a lease, ``renew()`` extends it (False when the agent no longer holds
one: set the rate again), ``status()`` is the agent's ``/status``. An agent
that does not answer is a ``ConnectionError``; a refused token a
``PermissionError``; each one line.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
from typing import Any

from ..fileio import read_json_input
from ..limits import MAX_RESPONSE_BYTES, MAX_TOKEN_BYTES

__all__ = ["AgentClient", "read_token"]


def read_token(path: str | os.PathLike[str]) -> str:
    """The token in an agent token file; one-line ValueError if it is not one."""
    info = read_json_input(path, "agent token file", MAX_TOKEN_BYTES)
    tok = info.get("token") if isinstance(info, dict) else None
    if not isinstance(tok, str) or len(tok) < 16:
        raise ValueError(f"{path} is not an agent token file (expected {{\"token\": \"...\"}}, 16+ characters)")
    return tok


class AgentClient:
    """Talks to one agent (module docstring)."""

    def __init__(self, url: str, token_file: str | os.PathLike[str], timeout: float = 2.0) -> None:
        u = urllib.parse.urlsplit(str(url))
        try:
            port = u.port
        except ValueError:
            port = None
        if u.scheme not in ("http", "https") or not u.hostname or port is None:
            raise ValueError(f"agent URL {url!r}: expected http://HOST:PORT")
        self.url = f"{u.scheme}://{u.netloc}"
        self.token = read_token(token_file)
        self.timeout = float(timeout)
        #: What the DTN delivered over its agent's last period (frame bit/s), from the last /rate or /renew
        #: answer; None until one carried it.
        self.delivered: float | None = None

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, self._doc(resp.read(MAX_RESPONSE_BYTES + 1))
        except urllib.error.HTTPError as exc:
            doc = self._doc(exc.read(MAX_RESPONSE_BYTES + 1), strict=False)
            if exc.code == 401:
                raise PermissionError(f"agent {self.url} refused the token: {doc.get('error', exc.reason)}") \
                    from None
            if exc.code in (400, 409):
                return exc.code, doc
            raise ConnectionError(f"agent {self.url}{path}: HTTP {exc.code}: {doc.get('error', exc.reason)}") \
                from None
        except (urllib.error.URLError, OSError) as exc:
            raise ConnectionError(f"agent {self.url} does not answer: {getattr(exc, 'reason', exc)}") from None

    def _doc(self, raw: bytes, strict: bool = True) -> dict[str, Any]:
        try:
            doc = json.loads(raw[:MAX_RESPONSE_BYTES].decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = None
        if not isinstance(doc, dict):
            if strict:
                raise ConnectionError(f"{self.url}: answer is not a JSON object; is that a scidmz agent?")
            return {}
        return doc

    def set_rate(self, bps: float) -> float:
        """Set the aggregate rate (frame bit/s) and grant the lease; returns the rate the agent holds."""
        code, doc = self._request("POST", "/rate", {"rate": float(bps)})
        if code != 200:
            raise ValueError(f"agent {self.url} refused rate {bps!r}: {doc.get('error')}")
        self._note_delivered(doc)
        return float(doc["rate"])

    def renew(self) -> bool:
        code, doc = self._request("POST", "/renew", {})
        if code == 200:
            self._note_delivered(doc)
        return code == 200

    def _note_delivered(self, doc: dict[str, Any]) -> None:
        v = doc.get("delivered")
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        self.delivered = float(v) if ok else None

    def lift(self) -> int:
        """Ask the agent to lift every cap it set now (a controller's clean exit); how many it lifted."""
        code, doc = self._request("POST", "/lift", {})
        return int(doc.get("lifted", 0)) if code == 200 else 0

    def status(self) -> dict[str, Any]:
        return self._request("GET", "/status")[1]

    def check(self) -> dict[str, Any]:
        """The agent's status, for a controller's start-up check: an agent that does not answer is a
        one-line ``ValueError`` (bad input: a wrong URL, exit 2 before anything is shaped), a refused
        token a ``PermissionError`` (also exit 2)."""
        try:
            st = self.status()
        except ConnectionError as exc:
            raise ValueError(str(exc)) from None
        if "state" not in st or "connections" not in st:
            raise ValueError(f"{self.url} answers, but not as a scidmz agent")
        return st
