"""Failure classification for vibe: its exit code, ``export.json`` and the ``Error:`` line.

vibe prints one ``Error: <message>`` line on stderr when it gives up (``Stopped: terminated``
/ ``Stopped: deadline`` when interrupted) and writes the same message to ``export.json``
``error.message`` with a machine code (``rate_limit``, ``invalid_api_key``, ``backend_error``,
``context_too_long``, ``refusal``, ``invalid_model``, ...) and an ``outcome``. Upstream HTTP
errors read ``API error occurred: Status NNN. Body: {...}`` with the upstream body verbatim.
Exit codes: 1 auth/config (``config_error``/``usage_error``), 2 upstream after vibe's own
retries (``infrastructure_failure``), 3 stopped (``terminated``, ``deadline``, limits), 4
aborted. Rules, first match wins (``cli-reference/vibe/README.md``, BRIEF §4):

1. A missing key ("Missing MISTRAL_API_KEY environment variable ...") → ``auth`` /
   ``AUTH_MISSING``.
2. Billing phrasing ("insufficient", "quota", "billing", "credit", "payment required") or
   HTTP 402 → ``billing`` / ``BILLING``, or ``usage_window`` / ``USAGE_WINDOW`` when a reset
   time can be parsed from the text.
3. Usage-window phrasing ("usage limit", "limit will reset", "resets at", ...) →
   ``usage_window`` with a best-effort ``retry_after_s``.
4. ``invalid_api_key``, HTTP 401/403, "invalid api key", "unauthorized" → ``auth`` /
   ``UPSTREAM_AUTH``.
5. ``rate_limit``, HTTP 429, "rate limit" → ``rate_limited`` / ``RATE_LIMITED``.
6. ``context_too_long`` or context-window phrasing → ``context_length`` / ``CONTEXT_LENGTH``.
7. ``refusal``, ``invalid_model``, image codes, HTTP 400/404/413/422, "No prompt provided",
   content-policy phrasing → ``client_error`` / ``UPSTREAM_CLIENT_ERROR`` (the HTTP status
   when there is one; 404 for ``invalid_model``).
8. Timeouts ("timed out", "stopped sending output") → ``UPSTREAM_TIMEOUT``; connection
   failures → ``CONNECTION_FAILED``; 529/"overloaded" → ``OVERLOADED``; other 5xx →
   ``UPSTREAM_5XX``; ``backend_error``, ``incomplete_stream``, ``internal_error`` →
   ``UPSTREAM_UNAVAILABLE`` (all ``unavailable``).
9. By outcome / exit code: ``deadline`` → ``UPSTREAM_TIMEOUT``; ``terminated`` →
   ``CLI_TERMINATED``; ``aborted`` (exit 4) → ``UPSTREAM_UNAVAILABLE`` (all ``unavailable``);
   other exit 1 → ``auth`` / ``CONFIG_ERROR`` (a configuration problem to surface); other
   exit 2 → ``unavailable`` / ``UPSTREAM_UNAVAILABLE``.
10. Anything else → ``unknown`` / ``UPSTREAM_ERROR``.

The billing and usage-window phrasings are vendor prose that does not occur in the captures;
they are best-effort (an unclassified error still advances the chain).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from olp.actors.anthropic._classify import parse_reset
from olp.failures import Code
from olp.ir import Category, Error

MESSAGE_LIMIT: Final = 300

_MISSING_KEY: Final = re.compile(r"missing \w*api_?key|missing .*api key|no api key")
_STATUS: Final = re.compile(r"\bstatus:?\s*(\d{3})\b", re.IGNORECASE)
_BILLING: Final = ("insufficient", "quota", "billing", "credit", "payment required")
_USAGE_WINDOW: Final = ("usage limit", "limit will reset", "limit resets", "resets at",
                        "resets in", "weekly limit", "monthly limit")
_AUTH_TEXT: Final = ("invalid api key", "unauthorized", "unauthenticated", "forbidden")
_CONTEXT: Final = ("context length", "context window", "too many tokens", "prompt is too long",
                   "maximum context", "input is too long", "exceeds the context",
                   "too large for model")
_POLICY: Final = ("content policy", "usage policy", "content filter", "moderation")
_TIMEOUT: Final = ("timed out", "timeout", "stopped sending output", "no response data")
_CONNECTION: Final = ("connection refused", "connecterror", "connection error",
                      "failed to connect", "connection reset", "name or service not known",
                      "temporary failure in name resolution", "remoteprotocolerror")
_CLIENT_CODES: Final = frozenset({"refusal", "invalid_model", "invalid_image_attachment",
                                  "images_not_supported"})
_UNAVAILABLE_CODES: Final = frozenset({"backend_error", "incomplete_stream", "internal_error",
                                       "compaction_failed"})


@dataclass(frozen=True, slots=True)
class Failure:
    """What vibe said about a failure. Every field may be missing (``""``/``None``)."""

    text: str = ""  # export.json error.message, else the stderr "Error:" line (no prefix)
    code: str | None = None  # export.json error.code, e.g. "rate_limit"
    outcome: str | None = None  # export.json outcome, e.g. "infrastructure_failure"
    exit_code: int | None = None


def cut(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def status_of(text: str) -> int | None:
    """The upstream HTTP status in vibe's ``API error occurred: Status NNN. Body: ...``."""
    m = _STATUS.search(text)
    return int(m.group(1)) if m else None


def classify(failure: Failure, *, now: float | None = None) -> Error:
    """The terminal :class:`Error` for a failure vibe reported (rules in the docstring).
    ``now`` (epoch seconds, default the current time) anchors a parsed reset time."""
    t = failure.text.lower()
    code = (failure.code or "").lower()
    outcome = (failure.outcome or "").lower()
    status = status_of(failure.text)

    def err(error_code: str, category: Category, retry_after_s: float | None = None,
            http_status: int | None = status) -> Error:
        message = cut(failure.text) or _fallback_message(failure)
        return Error(code=error_code, category=category, message=message, status=http_status,
                     retry_after_s=retry_after_s)

    if _MISSING_KEY.search(t):
        return err(Code.AUTH_MISSING, "auth")
    if _has(t, _BILLING) or status == 402:
        reset = parse_reset(failure.text, now=now)
        if reset is not None:
            return err(Code.USAGE_WINDOW, "usage_window", reset)
        return err(Code.BILLING, "billing")
    if _has(t, _USAGE_WINDOW):
        return err(Code.USAGE_WINDOW, "usage_window", parse_reset(failure.text, now=now))
    if code == "invalid_api_key" or status in (401, 403) or _has(t, _AUTH_TEXT):
        return err(Code.UPSTREAM_AUTH, "auth")
    if code == "rate_limit" or status == 429 or "rate limit" in t:
        return err(Code.RATE_LIMITED, "rate_limited")
    if code == "context_too_long" or _has(t, _CONTEXT):
        return err(Code.CONTEXT_LENGTH, "context_length")
    if (code in _CLIENT_CODES or status in (400, 404, 413, 422) or "no prompt provided" in t
            or _has(t, _POLICY)):
        fallback = 404 if code == "invalid_model" else 400
        return err(Code.UPSTREAM_CLIENT_ERROR, "client_error", http_status=status or fallback)
    if _has(t, _TIMEOUT):
        return err(Code.UPSTREAM_TIMEOUT, "unavailable")
    if _has(t, _CONNECTION):
        return err(Code.CONNECTION_FAILED, "unavailable")
    if status == 529 or "overloaded" in t:
        return err(Code.OVERLOADED, "unavailable")
    if status is not None and status >= 500:
        return err(Code.UPSTREAM_5XX, "unavailable")
    if code in _UNAVAILABLE_CODES:
        return err(Code.UPSTREAM_UNAVAILABLE, "unavailable")
    if outcome == "deadline":
        return err(Code.UPSTREAM_TIMEOUT, "unavailable")
    if outcome == "terminated":
        return err(Code.CLI_TERMINATED, "unavailable")
    if outcome == "aborted" or failure.exit_code == 4:
        return err(Code.UPSTREAM_UNAVAILABLE, "unavailable")
    if failure.exit_code == 1 or outcome in ("config_error", "usage_error"):
        return err(Code.CONFIG_ERROR, "auth")
    if failure.exit_code == 2 or outcome == "infrastructure_failure":
        return err(Code.UPSTREAM_UNAVAILABLE, "unavailable")
    return err(Code.UPSTREAM_ERROR, "unknown")


def _fallback_message(failure: Failure) -> str:
    parts = [f"exit code {failure.exit_code}" if failure.exit_code is not None else "",
             f"outcome {failure.outcome}" if failure.outcome else "",
             f"code {failure.code}" if failure.code else ""]
    detail = ", ".join(p for p in parts if p)
    return f"vibe failed ({detail})" if detail else "vibe failed"


def _has(text: str, phrases: tuple[str, ...]) -> bool:
    return any(p in text for p in phrases)
