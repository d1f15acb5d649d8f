"""The HTTP API's bearer token, over a real aiohttp server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from staticfleet.broker.security.http_auth import (
    TokenFileError,
    TokenSource,
    bearer_credentials,
    bearer_middleware,
)


async def _serve(source: TokenSource, requests: list[tuple[str, str | None]]) -> list[int]:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(middlewares=[bearer_middleware(source)])
    for path in ("/healthz", "/readyz", "/metrics", "/api/groups", "/api/groups/{group}"):
        app.router.add_get(path, ok)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    statuses = []
    try:
        async with aiohttp.ClientSession() as session:
            for path, token in requests:
                headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
                async with session.get(f"http://127.0.0.1:{port}{path}", headers=headers) as response:
                    statuses.append(response.status)
                    if response.status == 401:
                        assert response.headers["WWW-Authenticate"] == 'Bearer realm="staticfleet"'
    finally:
        await runner.cleanup()
    return statuses


def serve(source: TokenSource, *requests: tuple[str, str | None]) -> list[int]:
    return asyncio.run(_serve(source, list(requests)))


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("s3cret-token\n")
    return path


def test_probes_stay_open_and_api_and_metrics_need_the_token(token_file: Path) -> None:
    statuses = serve(
        TokenSource(token_file),
        ("/healthz", None),
        ("/readyz", None),
        ("/metrics", None),
        ("/api/groups", None),
        ("/api/groups/g", "wrong"),
        ("/metrics", "s3cret-token"),
        ("/api/groups/g", "s3cret-token"),
    )
    assert statuses == [200, 200, 401, 401, 401, 200, 200]


def test_a_rotated_token_replaces_the_old_one(token_file: Path) -> None:
    now = [0.0]
    source = TokenSource(token_file, clock=lambda: now[0])
    token_file.write_text("rotated-token-longer\n")
    now[0] = 2.0
    assert serve(source, ("/metrics", "s3cret-token"), ("/metrics", "rotated-token-longer")) == [401, 200]


def test_an_emptied_token_file_keeps_the_previous_token(token_file: Path) -> None:
    now = [0.0]
    source = TokenSource(token_file, clock=lambda: now[0])
    token_file.write_text("")
    now[0] = 2.0
    assert source.token() == "s3cret-token"


def test_a_missing_or_empty_token_file_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="cannot read the HTTP token file"):
        TokenSource(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    with pytest.raises(TokenFileError, match="is empty"):
        TokenSource(empty)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearerabc", None),
        ("", None),
        (None, None),
    ],
)
def test_the_bearer_scheme_is_matched_whatever_its_case(header: str | None, token: str | None) -> None:
    assert bearer_credentials(header) == token


def test_a_lower_case_scheme_is_let_in_over_a_real_server(token_file: Path) -> None:
    async def run() -> list[int]:
        async def ok(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application(middlewares=[bearer_middleware(TokenSource(token_file))])
        app.router.add_get("/api/groups", ok)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/groups"
        try:
            async with aiohttp.ClientSession() as session:
                statuses = []
                for header in ("bearer s3cret-token", "BEARER s3cret-token", "bearer wrong"):
                    async with session.get(url, headers={"Authorization": header}) as response:
                        statuses.append(response.status)
                return statuses
        finally:
            await runner.cleanup()

    assert asyncio.run(run()) == [200, 200, 401]
