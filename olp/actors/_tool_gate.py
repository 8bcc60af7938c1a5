"""The tool gate: what a CLI's parser reports about tool calls, checked against the request.

Every CLI job's parser is wrapped in a :class:`ToolGate` (by the runner), so a CLI adapter
only reports what its CLI printed and the rules live here once:

- Calls are held until the model's message ends (it arrives within milliseconds), then
  checked — a name the request did not offer, or arguments that are not one JSON object, end
  the job with ``TOOL_CALL_INVALID`` (``unavailable``: the chain falls back while nothing was
  sent). Each call is then released as OpenAI streams one: id and name first (no
  arguments), then the argument fragments as the CLI printed them, renumbered ``0, 1, ...``
  in order of appearance.
- A forced ``tool_choice`` (``required`` or a named function) holds text back until a call
  arrives; a message that ends without the forced call is ``TOOL_CHOICE_UNMET``, never prose.
- ``parallel_tool_calls: false`` keeps only the first call and stops right after it.
- A message that ended with calls ends with ``Stop(finish_reason="tool_calls")``: the runner
  returns on it, which kills the CLI (it waits for a ``tools/call`` answer that never comes).

Pure: no I/O, no trio; the same gate runs under ``MockClock`` and on real processes.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from olp.failures import Code, failure
from olp.ir import ChatRequest, Error, Event, Stop, TextDelta, ToolCallDelta, is_terminal

from ._adapter import LineParser
from ._toolbridge import forced_tool, offered_tools


@dataclass(slots=True)
class _Call:
    """One call as the CLI reported it so far."""

    id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)


class ToolGate:
    """A :class:`LineParser` that wraps another and enforces the request's tool rules."""

    def __init__(self, inner: LineParser, request: ChatRequest) -> None:
        self._inner = inner
        self._names = frozenset(t.name for t in offered_tools(request))
        self._forced = forced_tool(request) if self._names else None
        self._single = request.parallel_tool_calls is False
        self._held_text: list[TextDelta] = []
        self._pending: dict[int, _Call] = {}  # the CLI's index -> the call being reported
        self._order: list[int] = []  # the CLI's indices, in order of appearance
        self._released = 0  # calls sent on (their output indices are 0 .. released-1)
        self._terminal: Event | None = None

    # -- LineParser ---------------------------------------------------------------------

    def feed(self, line: bytes) -> Sequence[Event]:
        if self._terminal is not None:
            return ()
        return self._gate(self._inner.feed(line))

    def trailer(self, returncode: int, stderr_tail: bytes) -> Sequence[Event]:
        if self._terminal is not None:
            return ()
        out = list(self._gate(self._inner.trailer(returncode, stderr_tail)))
        if self._terminal is None:
            # The CLI exited: its terminal decides what the held calls and text become.
            out += self._gate([self._inner.finish(returncode, stderr_tail)])
        return [e for e in out if not is_terminal(e)]

    def finish(self, returncode: int, stderr_tail: bytes) -> Event:
        if self._terminal is None:
            self.trailer(returncode, stderr_tail)
        assert self._terminal is not None
        return self._terminal

    # -- the rules ----------------------------------------------------------------------

    def _gate(self, events: Sequence[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if self._terminal is not None:
                break
            if isinstance(event, ToolCallDelta):
                out += self._on_call_delta(event)
            elif isinstance(event, TextDelta) and self._forced is not None and not (
                    self._order or self._released):
                self._held_text.append(event)
            elif isinstance(event, Stop):
                out += self._on_stop(event)
            elif isinstance(event, Error):
                self._end(event, out)
            else:
                out.append(event)
        return out

    def _end(self, terminal: Event, out: list[Event]) -> None:
        self._terminal = terminal
        out.append(terminal)

    def _on_call_delta(self, delta: ToolCallDelta) -> list[Event]:
        out: list[Event] = []
        if delta.index not in self._pending:
            if self._order and self._single:
                # parallel_tool_calls is false: the first call is the answer.
                out += self._release_all()
                if self._terminal is None:
                    self._end(Stop(finish_reason="tool_calls"), out)
                return out
            self._pending[delta.index] = _Call()
            self._order.append(delta.index)
        call = self._pending[delta.index]
        call.id = call.id or delta.id
        call.name = call.name or delta.name
        if delta.arguments:
            call.fragments.append(delta.arguments)
        return out

    def _on_stop(self, stop: Stop) -> list[Event]:
        out = self._release_all()
        if self._terminal is not None:
            return out
        if self._released:
            self._end(Stop(finish_reason="tool_calls"), out)
        elif self._forced is not None:
            wanted = "a tool" if self._forced == "*" else f"the tool {self._forced}"
            self._end(failure(Code.TOOL_CHOICE_UNMET, "tool_choice required the model to call "
                              f"{wanted}, but it answered without a call", status=502), out)
        elif stop.finish_reason == "tool_calls":
            self._end(Stop(), out)  # the CLI said "tool use" but reported no call
        else:
            self._end(stop, out)
        return out

    def _release_all(self) -> list[Event]:
        """Check and send on every held call (and the text held before it)."""
        out: list[Event] = []
        for index in self._order:
            error = self._check(self._pending[index])
            if error is not None:
                self._end(error, out)
                return out
        if self._order:
            out += self._held_text
            self._held_text.clear()
        for index in self._order:
            call = self._pending.pop(index)
            # As OpenAI streams a call: id and name first (no arguments), then the fragments.
            out.append(ToolCallDelta(index=self._released, id=call.id or _new_id(),
                                     name=call.name))
            out += [ToolCallDelta(index=self._released, arguments=a)
                    for a in call.fragments or ["{}"]]
            self._released += 1
        self._order.clear()
        return out

    def _check(self, call: _Call) -> Error | None:
        if not call.name or call.name not in self._names:
            offered = ", ".join(sorted(self._names)) or "none"
            return failure(Code.TOOL_CALL_INVALID, f"the model called a tool the request did "
                           f"not offer ({call.name or 'no name'!r}; offered: {offered})",
                           status=502)
        if self._forced not in (None, "*") and call.name != self._forced:
            return failure(Code.TOOL_CHOICE_UNMET, f"tool_choice required the tool "
                           f"{self._forced}, but the model called {call.name}", status=502)
        text = "".join(call.fragments) or "{}"
        try:
            arguments = json.loads(text)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            return failure(Code.TOOL_CALL_INVALID, f"the model's arguments for {call.name} "
                           "are not a JSON object", status=502)
        return None


def _new_id() -> str:
    return f"call_{secrets.token_hex(12)}"
