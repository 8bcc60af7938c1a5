"""The lines of an :class:`~olp.providers.vibe._acp.AcpSession` → IR events, as :class:`VibeParser`
gives them for ``vibe -p`` (schema in ``tests/fixtures/cli-reference/vibe/acp/README.md``).

* ``session/update`` with ``agent_message_chunk`` text → :class:`TextDelta` as it streams
  (``vibe -p`` prints whole messages; here the deltas come as the upstream sends them). A
  chunk of a different ``messageId`` than the text before it (a later assistant message of a
  multi-step turn) starts with a blank line, as ``vibe -p`` separates messages.
* ``_session/retrying`` (vibe retries the upstream) → :class:`Retrying` with the attempt
  number, the category and the HTTP status when the detail names one (``"HTTP 429"``).
  vibe also retries a stream that stalled or broke *mid-answer*, and then streams the whole
  answer again under the same ``messageId``, with nothing to take back the partial text
  (captured: ``stall_retry.jsonl``; ``vibe -p`` marks that message ``discarded`` instead).
  So a retry after text has been streamed ends the job: ``STREAM_ENDED_EARLY``
  (``unavailable``), as a terminal event from :meth:`~VibeAcpParser.feed` (the caller then
  kills the session). With ``hold_text=True`` the parser instead keeps the text until the
  turn is over, drops it on a retry, and gives it as one :class:`TextDelta` with the result
  line - ``vibe -p``'s behaviour, without the streaming.
* ``usage_update`` → remembered (``_meta.promptTokens``/``completionTokens``) for a failed
  turn's usage; every other update (the prompt's echo, thoughts, tool calls, titles, command
  lists) and any other line → nothing.
* ``{"olp_prompt_result": {"stopReason", "usage"}}`` and ``{"olp_prompt_error": {"code",
  "message"}}``, the session's last line → remembered for :meth:`trailer`/:meth:`finish`.

:meth:`VibeAcpParser.trailer` → :class:`Usage` (the result's ``inputTokens``/``outputTokens``,
else the last usage update) when the turn succeeded or tokens were spent.
:meth:`VibeAcpParser.finish`:

* ``end_turn`` with text → ``Stop``; without text → ``PROTOCOL_ERROR`` (as ``vibe -p`` exiting
  0 without an assistant message);
* ``max_tokens``/``max_turn_requests`` with text → ``Stop(finish_reason="length")``;
* ``cancelled`` → ``CLI_TERMINATED`` (``vibe -p``'s "Stopped: terminated"), ``refusal`` →
  ``client_error``; other stop reasons without text → classified as vibe failures;
* an error response → :func:`._classify.classify` with the vibe code its JSON-RPC code
  stands for (``-31001`` ``rate_limit``, ``-31004`` ``context_too_long``, ``-31005``
  ``refusal``, ...) and vibe's message (``-31002`` "Invalid API key ..." → ``auth``,
  ``-32603`` "API error occurred: Status 500 ..." → ``unavailable``), so the categories match
  ``vibe -p``'s. vibe's rate-limit error names no reset time, so there is no
  ``retry_after_s``;
* no final line (the server died, or a kill vibe did not answer) → ``CLI_FAILED`` with the
  server's stderr excerpt.

Computed once, on the first call of either, and idempotent. Never raises on odd input.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from olp.failures import Code
from olp.ir import Category, Error, Event, Retrying, Stop, TextDelta, Usage
from olp.providers._exit import describe_exit, mask_secrets, stderr_excerpt

from ._acp import ERROR_KEY, RESULT_KEY
from ._classify import Failure, classify

__all__ = ["JSONRPC_TO_VIBE_CODE", "VibeAcpParser"]

STDERR_LIMIT: Final = 300
MESSAGE_SEPARATOR: Final = "\n\n"
#: vibe-acp's application error codes (``vibe/acp/exceptions.py``) → the ``export.json``
#: error code ``vibe -p`` writes for the same failure.
JSONRPC_TO_VIBE_CODE: Final[dict[int, str]] = {
    -31001: "rate_limit",
    -31003: "turn_limit",
    -31004: "context_too_long",
    -31005: "refusal",
    -31006: "compaction_failed",
    -31007: "invalid_image_attachment",
    -31008: "images_not_supported",
}
#: JSON-RPC codes whose failure ``vibe -p`` reports with this exit code (rules 17 and 18).
_EXIT_CODE: Final[dict[int, int]] = {-31002: 1, -32000: 1, -32603: 2}
_PROTOCOL_CODES: Final = frozenset({-32700, -32600, -32601, -32602})  # our request was wrong
_LENGTH_STOPS: Final = frozenset({"max_tokens", "max_turn_requests"})
_RETRY_CATEGORY: Final[dict[str, Category]] = {
    "rate_limited": "rate_limited", "server_error": "unavailable",
    "timed_out": "unavailable", "connection": "unavailable"}
_HTTP: Final = re.compile(r"\bHTTP (\d{3})\b")


class _Content(msgspec.Struct):
    type: str = ""
    text: str | None = None


class _UsageMeta(msgspec.Struct, rename="camel"):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Update(msgspec.Struct, rename="camel"):
    session_update: str = ""
    content: _Content | list[_Content] | None = None
    message_id: str | None = None
    meta: _UsageMeta | None = msgspec.field(default=None, name="_meta")


class _Params(msgspec.Struct):
    update: _Update | None = None
    category: str | None = None
    detail: str | None = None


class _TurnUsage(msgspec.Struct, rename="camel"):
    input_tokens: int | None = None
    output_tokens: int | None = None


class _Result(msgspec.Struct, rename="camel"):
    stop_reason: str | None = None
    usage: _TurnUsage | None = None


class _RpcError(msgspec.Struct):
    code: int | None = None
    message: str | None = None
    data: Any = None


class _Line(msgspec.Struct, rename={"result": RESULT_KEY, "error": ERROR_KEY}):
    method: str | None = None
    params: _Params | None = None
    result: _Result | None = None
    error: _RpcError | None = None


_LINE: Final = msgspec.json.Decoder(_Line)


class VibeAcpParser:
    """Per-job state for one :class:`~olp.providers.vibe._acp.AcpSession`. ``now`` is the
    clock for usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time, hold_text: bool = False,
                 ) -> None:
        self._now = now
        self._hold = hold_text
        self._held: list[str] = []
        self._emitted_text = False
        self._message_id: str | None = None
        self._retries = 0
        self._meta_usage: tuple[int, int] | None = None
        self._result: _Result | None = None
        self._error: _RpcError | None = None
        self._settled: tuple[tuple[Event, ...], Error | Stop] | None = None

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one session line; never raises (odd lines give nothing)."""
        if self._settled is not None or self._result is not None or self._error is not None:
            return ()
        try:
            parsed = _LINE.decode(line)
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()
        if parsed.result is not None:
            self._result = parsed.result
            held, self._held = "".join(self._held), []
            return (TextDelta(text=held),) if held else ()
        if parsed.error is not None:
            self._error = parsed.error
            self._held = []
            return ()
        params = parsed.params
        if params is None:
            return ()
        if parsed.method == "_session/retrying":
            if self._hold:
                self._held, self._emitted_text, self._message_id = [], False, None
            elif self._emitted_text:
                return (self._abandoned(params),)
            return (self._retrying(params),)
        if parsed.method != "session/update" or params.update is None:
            return ()
        return self._update(params.update)

    def _update(self, update: _Update) -> Sequence[Event]:
        if update.session_update == "usage_update":
            meta = update.meta
            if meta is not None:
                self._meta_usage = (max(0, meta.prompt_tokens or 0),
                                    max(0, meta.completion_tokens or 0))
            return ()
        if update.session_update != "agent_message_chunk":
            return ()
        content = update.content
        parts = content if isinstance(content, list) else [content] if content else []
        text = "".join(p.text for p in parts if p.type == "text" and p.text)
        if not text:
            return ()
        new_message = update.message_id is not None and update.message_id != self._message_id
        if update.message_id is not None:
            self._message_id = update.message_id
        if self._emitted_text and new_message:
            text = MESSAGE_SEPARATOR + text
        self._emitted_text = True
        if self._hold:
            self._held.append(text)
            return ()
        return (TextDelta(text=text),)

    def _abandoned(self, params: _Params) -> Error:
        """vibe retries after part of the answer went out: that part cannot be taken back."""
        detail = f" ({params.detail})" if params.detail else ""
        terminal = Error(code=Code.STREAM_ENDED_EARLY, category="unavailable", message=(
            f"vibe-acp retried the upstream{detail} after part of the answer had been "
            "streamed; the answer is incomplete"))
        self._settled = ((), terminal)
        return terminal

    def _retrying(self, params: _Params) -> Retrying:
        self._retries += 1
        match = _HTTP.search(params.detail or "")
        return Retrying(attempt=self._retries,
                        category=_RETRY_CATEGORY.get(params.category or "", "unknown"),
                        status=int(match.group(1)) if match else None)

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        """:class:`Usage` once the session is over (emit before :meth:`finish`'s event)."""
        return self._settle(returncode, stderr_tail)[0]

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        """The terminal event once the session is over (module docstring); idempotent."""
        return self._settle(returncode, stderr_tail)[1]

    def _settle(self, returncode: int, stderr_tail: bytes,
                ) -> tuple[tuple[Event, ...], Error | Stop]:
        if self._settled is None:
            terminal = self._terminal(returncode, stderr_tail)
            self._settled = (self._usage(isinstance(terminal, Stop)), terminal)
        return self._settled

    def _usage(self, succeeded: bool) -> tuple[Event, ...]:
        usage = self._result.usage if self._result is not None else None
        if usage is not None:
            tokens = (max(0, usage.input_tokens or 0), max(0, usage.output_tokens or 0))
        elif self._meta_usage is not None:
            tokens = self._meta_usage
        else:
            return ()
        if not succeeded and sum(tokens) == 0:
            return ()
        return (Usage(prompt_tokens=tokens[0], completion_tokens=tokens[1]),)

    def _terminal(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        if self._result is not None:
            return self._stopped(self._result.stop_reason or "")
        if self._error is not None:
            return self._failed(self._error)
        message = f"vibe-acp ended before it answered (session {describe_exit(returncode)})"
        excerpt = stderr_excerpt(stderr_tail, limit=STDERR_LIMIT)
        return Error(code=Code.CLI_FAILED, category="unknown",
                     message=f"{message}; stderr: {excerpt}" if excerpt else message)

    def _stopped(self, reason: str) -> Error | Stop:
        if reason == "end_turn":
            if self._emitted_text:
                return Stop(finish_reason="stop")
            return Error(code=Code.PROTOCOL_ERROR, category="unknown",
                         message="vibe-acp ended the turn without an assistant message")
        if reason in _LENGTH_STOPS and self._emitted_text:
            return Stop(finish_reason="length")
        if reason == "cancelled":
            failure = Failure(text="vibe-acp cancelled the turn", outcome="terminated")
        elif reason == "refusal":
            failure = Failure(text="the model refused to answer", code="refusal")
        else:
            failure = Failure(text=f"vibe-acp stopped the turn ({reason or 'no reason'}) "
                                   "without an answer", outcome=reason or None)
        return classify(failure, now=self._now())

    def _failed(self, error: _RpcError) -> Error:
        code = error.code if isinstance(error.code, int) else None
        text = mask_secrets(error.message or "")
        if code in _PROTOCOL_CODES:
            return Error(code=Code.PROTOCOL_ERROR, category="unknown",
                         message=f"vibe-acp refused the prompt ({code}): {text}"[:500])
        failure = Failure(text=text, code=JSONRPC_TO_VIBE_CODE.get(code or 0),
                          exit_code=_EXIT_CODE.get(code or 0))
        return classify(failure, now=self._now())
