"""The one client for the running proxy: where it looks, the owner key it sends, and what a
missing proxy, a missing key and a refusal each become."""

from __future__ import annotations

import argparse
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from olp.commands._proxy_client import Proxy, ProxyRefused, add_flags
from olp.config import Config, Settings


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None]] = []

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        status = 403 if self.path == "/forbidden" else 200
        body = json.dumps({"ok": True}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Handler.seen.clear()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _settings(token: str | None = None) -> Settings:
    return Settings(home=Path("/nowhere"), config_path=Path("/nowhere/config.json"), port=4000,
                    bind="127.0.0.1", log_level="info", config=Config(), owner_token=token)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return parser.parse_args(argv)


def test_the_flags_win_over_the_settings() -> None:
    assert Proxy.of(_settings("env-key"), _args()) == Proxy("http://127.0.0.1:4000", "env-key")
    assert Proxy.of(_settings("env-key"), _args("--url", "http://h:1/", "--token", "t")) == \
        Proxy("http://h:1/", "t")


def test_it_asks_as_the_owner(server: str) -> None:
    assert Proxy(server + "/", "secret").call("POST", "/v0/x?y=1") == {"ok": True}
    assert _Handler.seen == [("POST", "/v0/x?y=1", "Bearer secret")]


def test_without_an_owner_key_it_asks_nothing(server: str) -> None:
    assert Proxy(server, None).call("GET", "/health") is None
    assert _Handler.seen == []


def test_no_proxy_answering_is_none() -> None:
    assert Proxy("http://127.0.0.1:9", "secret").call("GET", "/health") is None


def test_an_error_status_is_a_refusal(server: str) -> None:
    with pytest.raises(ProxyRefused, match=r"refused: HTTP 403"):
        Proxy(server, "secret").call("GET", "/forbidden")
