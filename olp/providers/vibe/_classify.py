"""Failure classification for vibe: its exit code, ``export.json`` and the ``Error:`` line.

The inputs are vibe's stderr ``Error:``/``Stopped:`` line, ``export.json``'s error code,
message and ``outcome``, and the exit code. The rules are the table :data:`RULES`, first match
wins:

1. A missing key ("Missing MISTRAL_API_KEY environment variable ...") → ``auth`` /
   ``AUTH_MISSING``.
2. Billing phrasing ("insufficient", "quota", "billing", "credit", "payment required") or
   HTTP 402, when a reset time can be parsed from the text → ``usage_window`` /
   ``USAGE_WINDOW`` with that ``retry_after_s``.
3. The same billing phrasing or HTTP 402 without a reset → ``billing`` / ``BILLING``.
4. Usage-window phrasing ("usage limit", "limit will reset", "resets at", ...) →
   ``usage_window`` / ``USAGE_WINDOW`` with a best-effort ``retry_after_s``.
5. ``invalid_api_key``, HTTP 401/403, "invalid api key", "unauthorized" → ``auth`` /
   ``UPSTREAM_AUTH``.
6. ``rate_limit``, HTTP 429, "rate limit" → ``rate_limited`` / ``RATE_LIMITED``.
7. ``context_too_long`` or context-window phrasing → ``context_length`` / ``CONTEXT_LENGTH``.
8. ``refusal``, ``invalid_model``, image codes, HTTP 400/404/413/422, "No prompt provided",
   content-policy phrasing → ``client_error`` / ``UPSTREAM_CLIENT_ERROR`` (the HTTP status
   when there is one, else 404 for ``invalid_model`` and 400 otherwise).
9. Timeouts ("timed out", "stopped sending output") → ``unavailable`` / ``UPSTREAM_TIMEOUT``.
10. Connection failures ("connection refused", ``ConnectError``, ...) → ``unavailable`` /
    ``CONNECTION_FAILED``.
11. HTTP 529 or "overloaded" → ``unavailable`` / ``OVERLOADED``.
12. Other 5xx → ``unavailable`` / ``UPSTREAM_5XX``.
13. ``backend_error``, ``incomplete_stream``, ``internal_error``, ``compaction_failed`` →
    ``unavailable`` / ``UPSTREAM_UNAVAILABLE``.
14. Outcome ``deadline`` → ``unavailable`` / ``UPSTREAM_TIMEOUT``.
15. Outcome ``terminated`` → ``unavailable`` / ``CLI_TERMINATED``.
16. Outcome ``aborted`` or exit 4 → ``unavailable`` / ``UPSTREAM_UNAVAILABLE``.
17. Other exit 1, outcome ``config_error``/``usage_error`` → ``auth`` / ``CONFIG_ERROR`` (a
    configuration problem to surface).
18. Other exit 2, outcome ``infrastructure_failure`` → ``unavailable`` /
    ``UPSTREAM_UNAVAILABLE``.
19. Anything else → ``unknown`` / ``UPSTREAM_ERROR``.

Reset times are read by :func:`olp.failures.parse_reset`. The error shapes and exit codes
behind each rule: ``tests/fixtures/cli-reference/vibe/README.md``, "How OLP classifies
failures".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from olp.failures import Code, Rule, always, classify_by, has_any, parse_reset
from olp.failures import cut as cut
from olp.ir import Error

__all__ = ["RULES", "Failure", "classify", "cut", "status_of"]

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


def status_of(text: str) -> int | None:
    """The upstream HTTP status in vibe's ``API error occurred: Status NNN. Body: ...``."""
    m = _STATUS.search(text)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class _Facts:
    """A :class:`Failure` as the rules read it: lower-cased, with the status it names."""

    text: str  # lower-cased
    raw: str  # as vibe wrote it (for the reset time)
    code: str  # lower-cased, "" when missing
    outcome: str  # lower-cased, "" when missing
    exit_code: int | None
    status: int | None
    now: float | None


def _reset(f: _Facts) -> float | None:
    return parse_reset(f.raw, now=f.now)


def _billing(f: _Facts) -> bool:
    return has_any(f.text, _BILLING) or f.status == 402


def _client(f: _Facts) -> bool:
    return (f.code in _CLIENT_CODES or f.status in (400, 404, 413, 422)
            or "no prompt provided" in f.text or has_any(f.text, _POLICY))


def _client_status(f: _Facts) -> int | None:
    return f.status or (404 if f.code == "invalid_model" else 400)


RULES: Final[tuple[Rule[_Facts], ...]] = (
    Rule(Code.AUTH_MISSING, "auth", lambda f: _MISSING_KEY.search(f.text) is not None),
    Rule(Code.USAGE_WINDOW, "usage_window", lambda f: _billing(f) and _reset(f) is not None,
         retry_after=_reset),
    Rule(Code.BILLING, "billing", _billing),
    Rule(Code.USAGE_WINDOW, "usage_window", lambda f: has_any(f.text, _USAGE_WINDOW),
         retry_after=_reset),
    Rule(Code.UPSTREAM_AUTH, "auth", lambda f: f.code == "invalid_api_key"
         or f.status in (401, 403) or has_any(f.text, _AUTH_TEXT)),
    Rule(Code.RATE_LIMITED, "rate_limited",
         lambda f: f.code == "rate_limit" or f.status == 429 or "rate limit" in f.text),
    Rule(Code.CONTEXT_LENGTH, "context_length",
         lambda f: f.code == "context_too_long" or has_any(f.text, _CONTEXT)),
    Rule(Code.UPSTREAM_CLIENT_ERROR, "client_error", _client, status=_client_status),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable", lambda f: has_any(f.text, _TIMEOUT)),
    Rule(Code.CONNECTION_FAILED, "unavailable", lambda f: has_any(f.text, _CONNECTION)),
    Rule(Code.OVERLOADED, "unavailable", lambda f: f.status == 529 or "overloaded" in f.text),
    Rule(Code.UPSTREAM_5XX, "unavailable", lambda f: f.status is not None and f.status >= 500),
    Rule(Code.UPSTREAM_UNAVAILABLE, "unavailable", lambda f: f.code in _UNAVAILABLE_CODES),
    Rule(Code.UPSTREAM_TIMEOUT, "unavailable", lambda f: f.outcome == "deadline"),
    Rule(Code.CLI_TERMINATED, "unavailable", lambda f: f.outcome == "terminated"),
    Rule(Code.UPSTREAM_UNAVAILABLE, "unavailable",
         lambda f: f.outcome == "aborted" or f.exit_code == 4),
    Rule(Code.CONFIG_ERROR, "auth",
         lambda f: f.exit_code == 1 or f.outcome in ("config_error", "usage_error")),
    Rule(Code.UPSTREAM_UNAVAILABLE, "unavailable",
         lambda f: f.exit_code == 2 or f.outcome == "infrastructure_failure"),
)
"""vibe's rules 1-18 of the module docstring, in order; rule 19 is :data:`_OTHERWISE`."""

_OTHERWISE: Final[Rule[_Facts]] = Rule(Code.UPSTREAM_ERROR, "unknown", always)


def classify(failure: Failure, *, now: float | None = None) -> Error:
    """The terminal :class:`Error` for a failure vibe reported (rules in the docstring).
    ``now`` (epoch seconds, default the current time) anchors a parsed reset time."""
    status = status_of(failure.text)
    facts = _Facts(text=failure.text.lower(), raw=failure.text,
                   code=(failure.code or "").lower(), outcome=(failure.outcome or "").lower(),
                   exit_code=failure.exit_code, status=status, now=now)
    return classify_by(RULES, facts, default=_OTHERWISE, message=failure.text,
                       fallback=lambda _: _fallback_message(failure), status=status)


def _fallback_message(failure: Failure) -> str:
    parts = [f"exit code {failure.exit_code}" if failure.exit_code is not None else "",
             f"outcome {failure.outcome}" if failure.outcome else "",
             f"code {failure.code}" if failure.code else ""]
    detail = ", ".join(p for p in parts if p)
    return f"vibe failed ({detail})" if detail else "vibe failed"
