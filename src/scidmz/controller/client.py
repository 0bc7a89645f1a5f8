"""``ControlClient``: what ``scidmz control set-target|status`` use to talk to a running daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..limits import MAX_RESPONSE_BYTES
from .tokenfile import DEFAULT_API, default_token_file, parse_api_address, read_token_info

__all__ = ["ControlClient"]


def _answer(raw: bytes, url: str) -> dict[str, Any]:
    """One API answer: at most ``limits.MAX_RESPONSE_BYTES``, a JSON object of bounded depth."""
    from ..fileio import parse_json

    if len(raw) > MAX_RESPONSE_BYTES:
        raise RuntimeError(f"{url}: answer longer than {MAX_RESPONSE_BYTES} bytes; is that the scidmz daemon?")
    try:
        doc = parse_json(raw, f"answer of {url}")
    except ValueError as exc:  # the server's fault, not the user's input: a runtime failure
        raise RuntimeError(str(exc)) from None
    if not isinstance(doc, dict):
        raise RuntimeError(f"{url}: answer is not a JSON object; is that the scidmz daemon?")
    return doc


class ControlClient:
    """Talks to a running daemon: reads the token (and the API address) from the token file."""

    def __init__(self, api: str | None = None, token_file: str | os.PathLike[str] | None = None,
                 timeout: float = 5.0) -> None:
        path = Path(token_file) if token_file is not None else default_token_file()
        if not path.exists():
            raise FileNotFoundError(
                f"no control token file at {path}: is `scidmz control run` running? (or pass --token-file)")
        try:
            info = read_token_info(path)  # a regular file, bounded (limits.MAX_TOKEN_BYTES)
            self.token = str(info["token"])
        except PermissionError:
            raise PermissionError(f"cannot read the control token file {path} (run as its owner)") from None
        except (KeyError, TypeError):
            raise ValueError(f"{path} is not a control token file") from None
        host, port = parse_api_address(api or info.get("api") or DEFAULT_API)
        self.base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self.timeout = timeout

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return _answer(resp.read(MAX_RESPONSE_BYTES + 1), self.base + path)
        except urllib.error.HTTPError as exc:
            try:
                msg = _answer(exc.read(MAX_RESPONSE_BYTES + 1), self.base + path).get("error", exc.reason)
            except (ValueError, RuntimeError, AttributeError):
                msg = exc.reason
            if exc.code == 400:
                raise ValueError(msg) from None
            if exc.code == 401:
                raise PermissionError(f"control API rejected the token: {msg}") from None
            raise RuntimeError(f"control API {path}: HTTP {exc.code}: {msg}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RuntimeError(f"cannot reach the control daemon at {self.base}: {reason}") from None

    def status(self) -> dict[str, Any]:
        return self._request("GET", "/status")

    def set_target(self, target: str | float) -> float:
        return float(self._request("POST", "/target", {"target": target})["target"])
