"""Logging on stderr: JSON lines for services and files, readable lines on a terminal
(``OLP_LOG_FORMAT``: ``auto``, the default, picks by whether stderr is a terminal). Fields come
from ``extra=``; prompts are never logged."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message",
                                                                                  "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items()
            if k not in _STANDARD and not k.startswith("_")}


#: What ``json.dumps(entry, default=str, ensure_ascii=False)`` does, made once.
_JSON = json.JSONEncoder(default=str, ensure_ascii=False)


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_extras(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _JSON.encode(entry)


class TextFormatter(logging.Formatter):
    """One readable line: local time, level (upper case from ``warning`` up), the message,
    then the extras as ``key=value`` (``provider=anthropic``)."""

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname if record.levelno >= logging.WARNING else \
            record.levelname.lower()
        line = f"{time.strftime('%H:%M:%S', time.localtime(record.created))} {level:<7} " \
               f"{record.getMessage()}"
        extras = " ".join(f"{k}={_text(v)}" for k, v in _extras(record).items())
        if extras:
            line += f"  [{extras}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "-"
    return str(value)


def configure(level: str = "info", stream: TextIO | None = None, fmt: str = "auto") -> None:
    """Send every logger (ours, hypercorn's) to ``stream`` (stderr): JSON lines, or readable
    lines when ``fmt`` is ``text``, or ``auto`` and the stream is a terminal."""
    out = stream or sys.stderr
    handler = logging.StreamHandler(out)
    text = fmt == "text" or (fmt == "auto" and out.isatty())
    handler.setFormatter(TextFormatter() if text else JsonLinesFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per upstream request
    # Neither formatter prints the caller, thread or process: don't look them up for every
    # record (finding the caller walks the stack, on the hot path of every request).
    logging._srcfile = None  # the documented switch
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    if not text:
        logging.Formatter.converter = time.gmtime
