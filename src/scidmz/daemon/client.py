"""``ControlClient``: what ``scidmz control set-target|status`` use to talk to a running daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .tokenfile import DEFAULT_API, default_token_file, parse_api_address

__all__ = ["ControlClient"]


class ControlClient:
    """Talks to a running daemon: reads the token (and the API address) from the token file."""

    def __init__(self, api: str | None = None, token_file: str | os.PathLike[str] | None = None,
                 timeout: float = 5.0) -> None:
        path = Path(token_file) if token_file is not None else default_token_file()
        try:
            info = json.loads(path.read_text())
            self.token = str(info["token"])
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no control token file at {path}: is `scidmz control run` running? (or pass --token-file)"
            ) from None
        except IsADirectoryError:
            raise ValueError(f"control token file {path} is a directory") from None
        except PermissionError:
            raise PermissionError(f"cannot read the control token file {path} (run as its owner)") from None
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
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
                return json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            try:
                msg = json.loads(exc.read().decode()).get("error", exc.reason)
            except ValueError:
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
