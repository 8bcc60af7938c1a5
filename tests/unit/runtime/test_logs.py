"""Log lines (issue #30, a new user's first start): readable on a terminal, JSON lines for a
service or a file, as ``OLP_LOG_FORMAT`` (``auto``, ``text``, ``json``) says."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from olp.config import ConfigError
from olp.config._env import log_format
from olp.runtime import logs


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def emit(stream: io.StringIO, fmt: str) -> str:
    logs.configure("info", stream, fmt)
    logging.getLogger("olp.test").warning("provider skipped: %s", "`claude` not found",
                                          extra={"provider": "anthropic", "urls": ["a", "b"]})
    logging.getLogger("olp.test").info("listening")
    return stream.getvalue()


def test_a_terminal_gets_readable_lines() -> None:
    out = emit(Terminal(), "auto").splitlines()
    assert out[0].split(" ", 1)[1] == ("WARNING provider skipped: `claude` not found  "
                                       "[provider=anthropic urls=a,b]")
    assert out[1].split(" ", 1)[1] == "info    listening"


def test_anything_else_gets_json_lines() -> None:
    first = json.loads(emit(io.StringIO(), "auto").splitlines()[0])
    assert first["level"] == "warning" and first["provider"] == "anthropic"
    assert first["msg"] == "provider skipped: `claude` not found"


@pytest.mark.parametrize(("fmt", "stream", "is_json"), [
    ("json", Terminal, True), ("text", io.StringIO, False)])
def test_the_format_can_be_chosen(fmt: str, stream: type[io.StringIO], is_json: bool) -> None:
    line = emit(stream(), fmt).splitlines()[0]
    assert line.startswith("{") is is_json


def test_olp_log_format_values() -> None:
    assert log_format(None) == "auto" and log_format(" TEXT ") == "text"
    with pytest.raises(ConfigError, match="OLP_LOG_FORMAT: expected one of auto, text, json"):
        log_format("yaml")
