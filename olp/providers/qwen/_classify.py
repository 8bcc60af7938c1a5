"""Failure classification for qwen: the ``result`` error text, stderr and the exit code.

The CLI's 429 hint (:data:`CLI_HINT`, it mentions "quota") is removed before the rules read
the text, so a plain 429 is never read as billing. The rules are the table :data:`RULES`,
first match wins:

1. ``No input provided via stdin`` (an empty prompt) → ``client_error`` /
   ``UPSTREAM_CLIENT_ERROR`` (400).
2. The Qwen OAuth login refused ("free tier was discontinued"), ``is disabled by the current
   configuration``, exit 52 → ``auth`` / ``CONFIG_ERROR``.
3. Billing phrasing ("insufficient_quota", "exceeded your current quota", "insufficient
   balance", "arrearage", "billing", "payment required", "credit") or HTTP 402, with a reset
   parsed from the text → ``usage_window`` / ``USAGE_WINDOW``; without → ``billing`` /
   ``BILLING``.
4. Usage-window phrasing ("usage limit", "limit will reset", "resets at", "weekly limit",
   ...) → ``usage_window`` / ``USAGE_WINDOW`` with a best-effort ``retry_after_s``.
5. HTTP 401/403, "incorrect api key", "invalid api key", "unauthorized" → ``auth`` /
   ``UPSTREAM_AUTH``.
6. HTTP 429, "rate limit" → ``rate_limited`` / ``RATE_LIMITED``.
7. Context-window phrasing ("maximum context length", "context window", ...) →
   ``context_length`` / ``CONTEXT_LENGTH``.
8. HTTP 400/404/413/422 or content-policy phrasing → ``client_error`` /
   ``UPSTREAM_CLIENT_ERROR`` with that status (400 without one).
9. Timeouts ("timed out", "timeout") → ``unavailable`` / ``UPSTREAM_TIMEOUT``.
10. Connection failures ("connection error", "econnrefused", ...) → ``unavailable`` /
    ``CONNECTION_FAILED``.
11. HTTP 503/529 or "overloaded" → ``unavailable`` / ``OVERLOADED``.
12. Other 5xx → ``unavailable`` / ``UPSTREAM_5XX``.
13. The tool-call budget (exit 55, "tool-call budget") → ``unavailable`` /
    ``TOOL_CALL_INVALID``: the model called one of qwen's built-in tools, none ran, and this
    hop has no answer (a later hop may).
14. "Operation cancelled.", exit 130 or a signal → ``unavailable`` / ``CLI_TERMINATED``.
15. Anything else → ``unknown`` / ``UPSTREAM_ERROR`` (it advances the chain).

The error shapes and exit codes behind each rule:
``tests/fixtures/cli-reference/qwen/README.md``, "How OLP classifies failures".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from olp.failures import Code, Rule, always, classify_by, has_any, parse_reset
from olp.ir import Error

__all__ = ["CLI_HINT", "RULES", "Failure", "classify", "status_of"]

#: What qwen appends to a rate-limit error (not the upstream's words).
CLI_HINT: Final = ("Possible quota limitations in place or slow response times detected. "
                   "Please wait and try again later.")
_STATUS: Final = re.compile(r"\[API Error: (\d{3})\b")
_NO_INPUT: Final = "no input provided via stdin"
_CONFIG: Final = ("free tier was discontinued", "is disabled by the current configuration")
_BILLING: Final = ("insufficient_quota", "exceeded your current quota", "insufficient balance",
                   "arrearage", "billing", "payment required", "credit")
_USAGE_WINDOW: Final = ("usage limit", "limit will reset", "limit resets", "resets at",
                        "resets in", "weekly limit", "monthly limit", "weekly quota")
_AUTH_TEXT: Final = ("incorrect api key", "invalid api key", "unauthorized", "unauthenticated")
_CONTEXT: Final = ("maximum context length", "context length", "context window",
                   "too many tokens", "prompt is too long", "input is too long",
                   "exceeds the context")
_POLICY: Final = ("content policy", "content_policy", "safety system", "data_inspection_failed",
                  "inappropriate content")
_TIMEOUT: Final = ("timed out", "timeout")
_CONNECTION: Final = ("connection error", "econnrefused", "econnreset", "enotfound",
                      "fetch failed", "socket hang up", "connection refused")
_BUDGET: Final = "tool-call budget"
_CANCELLED: Final = "operation cancelled"


@dataclass(frozen=True, slots=True)
class Failure:
    """What qwen said about a failure: the ``result`` error text (else the stderr tail) and
    the exit code (``None`` while it still runs). Every field may be missing."""

    text: str = ""
    exit_code: int | None = None


def status_of(text: str) -> int | None:
    """The upstream HTTP status in qwen's ``[API Error: NNN ...]``, or ``None``."""
    m = _STATUS.search(text)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class _Facts:
    text: str  # lower-cased, the CLI's hint removed
    raw: str  # as qwen wrote it, the hint removed (for the reset time)
    status: int | None
    exit_code: int | None
    now: float | None


def _reset(f: _Facts) -> float | None:
    return parse_reset(f.raw, now=f.now)


def _billing(f: _Facts) -> bool:
    return has_any(f.text, _BILLING) or f.status == 402


def _client(f: _Facts) -> bool:
    return f.status in (400, 404, 413, 422) or has_any(f.text, _POLICY)


def _signalled(f: _Facts) -> bool:
    return _CANCELLED in f.text or f.exit_code == 130 or (
        f.exit_code is not None and f.exit_code < 0)


RULES: Final[tuple[Rule[_Facts], ...]] = (
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error", lambda f: _NO_INPUT in f.text,
         status=lambda f: 400),
    Rule(Code.CONFIG_ERROR, "auth", lambda f: has_any(f.text, _CONFIG) or f.exit_code == 52),
    Rule(Code.USAGE_WINDOW, "usage_window", lambda f: _billing(f) and _reset(f) is not None,
         retry_after=_reset),
    Rule(Code.BILLING, "billing", _billing),
    Rule(Code.USAGE_WINDOW, "usage_window", lambda f: has_any(f.text, _USAGE_WINDOW),
         retry_after=_reset),
    Rule(Code.UPSTREAM_AUTH, "auth",
         lambda f: f.status in (401, 403) or has_any(f.text, _AUTH_TEXT)),
    Rule(Code.RATE_LIMITED, "rate_limited", lambda f: f.status == 429 or "rate limit" in f.text),
    Rule(Code.CONTEXT_LENGTH, "context_length", lambda f: has_any(f.text, _CONTEXT)),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error", _client,
         status=lambda f: f.status or 400),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable", lambda f: has_any(f.text, _TIMEOUT)),
    Rule(Code.CONNECTION_FAILED, "unavailable", lambda f: has_any(f.text, _CONNECTION)),
    Rule(Code.OVERLOADED, "unavailable",
         lambda f: f.status in (503, 529) or "overloaded" in f.text),
    Rule(Code.UPSTREAM_5XX, "unavailable", lambda f: f.status is not None and f.status >= 500),
    Rule(Code.TOOL_CALL_INVALID, "unavailable",
         lambda f: f.exit_code == 55 or _BUDGET in f.text),
    Rule(Code.CLI_TERMINATED, "unavailable", _signalled),
)
"""qwen's rules 1-14 of the module docstring, in order; rule 15 is :data:`_OTHERWISE`."""

_OTHERWISE: Final[Rule[_Facts]] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def classify(failure: Failure, *, now: float | None = None) -> Error:
    """The terminal :class:`Error` for a failure qwen reported (rules in the docstring).
    ``now`` (epoch seconds, default the current time) anchors a parsed reset time."""
    raw = " ".join(failure.text.replace(CLI_HINT, " ").split())
    status = status_of(raw)
    facts = _Facts(text=raw.lower(), raw=raw, status=status, exit_code=failure.exit_code,
                   now=now)
    return classify_by(RULES, facts, default=_OTHERWISE, message=raw,
                       fallback=lambda _: _fallback_message(failure), status=status)


def _fallback_message(failure: Failure) -> str:
    if failure.exit_code is None:
        return "qwen failed"
    return f"qwen failed (exit code {failure.exit_code})"
