"""A bearer token for the HTTP API: /api/* and /metrics need it, /healthz and /readyz stay open (kubelet
probes carry no token). The token comes from a file a Secret can mount and is re-read when it changes."""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def bearer_credentials(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None. The scheme is matched whatever its
    case, as RFC 6750 (by RFC 7235) has it: `bearer x` and `BEARER x` carry the token `x`."""
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


class TokenFileError(ValueError):
    """A token file that cannot be used."""


def _read(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TokenFileError(f"cannot read the HTTP token file {path}: {exc.strerror}") from exc
    if not token:
        raise TokenFileError(f"the HTTP token file {path} is empty")
    return token


class TokenSource:
    """The current token; the file is checked for changes at most every `interval` seconds, and a file
    that became unreadable or empty keeps the previous token."""

    def __init__(
        self, path: Path, *, interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._interval = interval
        self._clock = clock
        self._token = _read(path)
        self._stamp = self._file_stamp()
        self._checked = clock()

    def _file_stamp(self) -> tuple[int, int, int]:
        try:
            st = os.stat(self.path)
        except OSError:
            return (-1, -1, -1)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def token(self) -> str:
        now = self._clock()
        if now - self._checked >= self._interval:
            self._checked = now
            stamp = self._file_stamp()
            if stamp != self._stamp:
                try:
                    self._token = _read(self.path)
                except TokenFileError:
                    return self._token
                self._stamp = stamp
        return self._token

    def accepts(self, header: str | None) -> bool:
        offered = bearer_credentials(header)
        return offered is not None and hmac.compare_digest(offered.encode(), self.token().encode())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_middleware(source: TokenSource) -> Middleware:
    @web.middleware
    async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS or source.accepts(request.headers.get("Authorization")):
            return await handler(request)
        return web.json_response(
            {"error": "unauthorized", "detail": "send Authorization: Bearer <token from --http-token-file>"},
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="staticfleet"'},
        )

    return require_token
