"""An :class:`~olp.providers.vibe._acp_session.AcpSession`'s lines → IR events, as
:class:`VibeParser` gives them for ``vibe -p``.

``agent_message_chunk`` text → :class:`TextDelta` as it streams (a new ``messageId`` after a
blank line), ``agent_thought_chunk`` text → :class:`ReasoningDelta` likewise (held with the text
under ``hold_text``; streamed thinking that a retry repeats is not taken back: it is not
content); ``_session/retrying`` → :class:`Retrying`, but after streamed text →
``STREAM_ENDED_EARLY`` (vibe would stream the answer again with nothing to take back; with
``hold_text`` the text waits for the result and a retry drops it); ``usage_update`` kept for
a failed turn's usage. The session's last line (a result or an error) gives
:meth:`~VibeAcpParser.trailer`'s :class:`Usage` and :meth:`~VibeAcpParser.finish`'s terminal
event, an error classified with the vibe code its JSON-RPC code stands for
(:data:`JSONRPC_TO_VIBE_CODE`), so categories match ``vibe -p``'s; no last line →
``CLI_FAILED``. Each line and each outcome: ``tests/fixtures/cli-reference/vibe/acp/
README.md``, "How OLP reads a session".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from olp.failures import Code, failure
from olp.ir import Category, Error, Event, ReasoningDelta, Retrying, Stop, TextDelta, Usage
from olp.providers._exit import describe_exit, mask_secrets
from olp.providers._finish import TerminalOnce, cli_failed

from ._acp_protocol import ERROR_KEY, RESULT_KEY
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
#: JSON-RPC codes whose failure ``vibe -p`` reports with this exit code (vibe's classification
#: rules 17 and 18).
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
    prompt_tokens: int | None = None  # cached ones included
    completion_tokens: int | None = None
    cached_tokens: int | None = None


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
    input_tokens: int | None = None  # cached ones included
    output_tokens: int | None = None
    cached_read_tokens: int | None = None  # ACP's; vibe leaves it out while it is 0


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


def _text(update: _Update) -> str:
    content = update.content
    parts = content if isinstance(content, list) else [content] if content else []
    return "".join(p.text for p in parts if p.type == "text" and p.text)


class VibeAcpParser(TerminalOnce):
    """Per-job state for one :class:`~olp.providers.vibe._acp_session.AcpSession`. ``now`` is the
    clock for usage-window resets."""

    def __init__(self, *, now: Callable[[], float] = time.time, hold_text: bool = False,
                 ) -> None:
        self._now = now
        self._hold = hold_text
        self._held: list[str] = []
        self._held_thought: list[str] = []
        self._emitted_text = False
        self._message_id: str | None = None
        self._thought_id: str | None = None
        self._emitted_thought = False
        self._retries = 0
        self._meta_usage: Usage | None = None  # the last usage_update's
        self._result: _Result | None = None
        self._error: _RpcError | None = None
        self._after_exit: tuple[Event, ...] = ()

    def feed(self, line: bytes) -> Sequence[Event]:
        """IR events for one session line; never raises (odd lines give nothing)."""
        if self._terminal is not None or self._result is not None or self._error is not None:
            return ()
        try:
            parsed = _LINE.decode(line)
        except msgspec.DecodeError:  # includes ValidationError: not an object, wrong types
            return ()
        if parsed.result is not None:
            self._result = parsed.result
            thought, self._held_thought = "".join(self._held_thought), []
            held, self._held = "".join(self._held), []
            return (*((ReasoningDelta(text=thought),) if thought else ()),
                    *((TextDelta(text=held),) if held else ()))
        if parsed.error is not None:
            self._error = parsed.error
            self._held, self._held_thought = [], []
            return ()
        params = parsed.params
        if params is None:
            return ()
        if parsed.method == "_session/retrying":
            if self._hold:
                self._held, self._emitted_text, self._message_id = [], False, None
                self._held_thought, self._emitted_thought, self._thought_id = [], False, None
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
                self._meta_usage = Usage(prompt_tokens=max(0, meta.prompt_tokens or 0),
                                         completion_tokens=max(0, meta.completion_tokens or 0),
                                         cached_tokens=max(0, meta.cached_tokens or 0))
            return ()
        if update.session_update == "agent_thought_chunk":
            return self._thought(update)
        if update.session_update != "agent_message_chunk":
            return ()
        text = _text(update)
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

    def _thought(self, update: _Update) -> Sequence[Event]:
        text = _text(update)
        if not text:
            return ()
        new_message = update.message_id is not None and update.message_id != self._thought_id
        if update.message_id is not None:
            self._thought_id = update.message_id
        if self._emitted_thought and new_message:
            text = MESSAGE_SEPARATOR + text
        self._emitted_thought = True
        if self._hold:
            self._held_thought.append(text)
            return ()
        return (ReasoningDelta(text=text),)

    def _abandoned(self, params: _Params) -> Error:
        """vibe retries after part of the answer went out: that part cannot be taken back."""
        detail = f" ({params.detail})" if params.detail else ""
        self._terminal = failure(
            Code.STREAM_ENDED_EARLY, f"vibe-acp retried the upstream{detail} after part of "
            "the answer had been streamed; the answer is incomplete")
        return self._terminal

    def _retrying(self, params: _Params) -> Retrying:
        self._retries += 1
        match = _HTTP.search(params.detail or "")
        return Retrying(attempt=self._retries,
                        category=_RETRY_CATEGORY.get(params.category or "", "unknown"),
                        status=int(match.group(1)) if match else None)

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        """:class:`Usage` once the session is over (emit before :meth:`finish`'s event)."""
        self.finish(returncode, stderr_tail)
        return self._after_exit

    def _exit_event(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        terminal = self._outcome(returncode, stderr_tail)
        self._after_exit = self._usage(isinstance(terminal, Stop))
        return terminal

    def _usage(self, succeeded: bool) -> tuple[Event, ...]:
        """The prompt result's usage, else the last ``usage_update``'s (a failed turn); the
        cached count of the result when it has one, else the update's (the same session
        figure)."""
        usage = self._result.usage if self._result is not None else None
        found = self._meta_usage
        if usage is not None:
            cached = usage.cached_read_tokens
            if cached is None:
                cached = found.cached_tokens if found is not None else 0
            found = Usage(prompt_tokens=max(0, usage.input_tokens or 0),
                          completion_tokens=max(0, usage.output_tokens or 0),
                          cached_tokens=max(0, cached))
        if found is None or (not succeeded and found.total_tokens == 0):
            return ()
        return (found,)

    def _outcome(self, returncode: int, stderr_tail: bytes) -> Error | Stop:
        if self._result is not None:
            return self._stopped(self._result.stop_reason or "")
        if self._error is not None:
            return self._failed(self._error)
        return cli_failed(f"vibe-acp ended before it answered (session "
                          f"{describe_exit(returncode)})", stderr_tail, limit=STDERR_LIMIT)

    def _stopped(self, reason: str) -> Error | Stop:
        if reason == "end_turn":
            if self._emitted_text:
                return Stop(finish_reason="stop")
            return failure(Code.PROTOCOL_ERROR,
                           "vibe-acp ended the turn without an assistant message")
        if reason in _LENGTH_STOPS and self._emitted_text:
            return Stop(finish_reason="length")
        if reason == "cancelled":
            stopped = Failure(text="vibe-acp cancelled the turn", outcome="terminated")
        elif reason == "refusal":
            stopped = Failure(text="the model refused to answer", code="refusal")
        else:
            stopped = Failure(text=f"vibe-acp stopped the turn ({reason or 'no reason'}) "
                                   "without an answer", outcome=reason or None)
        return classify(stopped, now=self._now())

    def _failed(self, error: _RpcError) -> Error:
        code = error.code if isinstance(error.code, int) else None
        text = mask_secrets(error.message or "")
        if code in _PROTOCOL_CODES:
            return failure(Code.PROTOCOL_ERROR,
                           f"vibe-acp refused the prompt ({code}): {text}"[:500])
        refused = Failure(text=text, code=JSONRPC_TO_VIBE_CODE.get(code or 0),
                          exit_code=_EXIT_CODE.get(code or 0))
        return classify(refused, now=self._now())
