"""The stream half of the IR: a closed tagged union of events a provider emits for one job.

A job's event stream is zero or more non-terminal events followed by exactly one terminal
event, :class:`Stop` or :class:`Error`. Only :class:`TextDelta` and :class:`ToolCallDelta`
are *content*: the first of them is what commits a response to the client.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

Category = Literal[
    "usage_window",  # a subscription window that resets
    "billing",  # no credit / quota exhausted with no reset
    "rate_limited",  # a short 429
    "unavailable",  # 5xx, overloaded, connection failure, timeouts, spawn failure, saturation
    "context_length",
    "auth",  # a configuration problem to surface
    "client_error",  # 400/403/404/422, content policy: never falls back
    "unknown",
]
CATEGORIES: Final[tuple[Category, ...]] = (
    "usage_window", "billing", "rate_limited", "unavailable", "context_length", "auth",
    "client_error", "unknown",
)

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


class _Event(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
             tag_field="type"):
    """Base for stream events; the tag is explicit so renaming a class never changes the wire."""


class Start(_Event, frozen=True, tag="start"):
    """The upstream said which model is answering (a dated snapshot name, say). Not content.

    ``session``: what a CLI hop did with the conversation's own CLI session, when it keeps
    sessions (``resumed``, ``new``, ``evicted:<why>``; ``X-OLP-Session``, issue #25)."""

    model: str
    session: str | None = None


class TextDelta(_Event, frozen=True, tag="text_delta"):
    text: str


class ReasoningDelta(_Event, frozen=True, tag="reasoning_delta"):
    """A piece of the model's thinking, or of a summary of it, as the CLI reported it (issue
    #27). Not content: it commits nothing (the first-chunk rule, ADR 0026). ``signature``:
    never a vendor's; OLP cannot sign thinking (ADR 0026)."""

    text: str


class ToolCallDelta(_Event, frozen=True, tag="tool_call_delta"):
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Usage(_Event, frozen=True, tag="usage"):
    """What one answer cost, in tokens.

    ``prompt_tokens`` counts *every* input token, cached ones included (OpenAI's convention;
    what the ledger and a key's token limits count). Of them, ``cached_tokens`` were read from
    the vendor's prompt cache and ``cache_write_tokens`` written to it (Anthropic's
    ``cache_creation_input_tokens``). Anthropic's own ``input_tokens`` leaves both out: that
    is :attr:`uncached_prompt_tokens`.
    """

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0  # of ``completion_tokens``, those spent thinking (#27)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def uncached_prompt_tokens(self) -> int:
        """The input tokens neither read from nor written to the cache (never below 0)."""
        return max(0, self.prompt_tokens - self.cached_tokens - self.cache_write_tokens)


class Retrying(_Event, frozen=True, tag="retrying"):
    """The upstream is being retried within the hop. Not content.

    ``bounded``: the proxy's own short per-hop retry (HTTP providers), which the engine lets
    finish; otherwise a CLI retrying on its own, possibly for minutes.
    """

    attempt: int
    category: Category
    max_retries: int | None = None
    delay_s: float | None = None
    status: int | None = None
    bounded: bool = False


class QuotaReport(_Event, frozen=True, tag="quota"):
    """The CLI said how much of one of the account's usage windows is used (claude's
    ``rate_limit_event``). Not content; never cached.

    ``window`` as the CLI names it (``five_hour``, ``seven_day``, ...); ``status``
    ``allowed``, ``allowed_warning`` or ``rejected``; ``utilization`` a fraction (0..1) when
    given; ``resets_at`` wall-clock seconds when given.
    """

    window: str
    status: str
    utilization: float | None = None
    resets_at: float | None = None


class Stop(_Event, frozen=True, tag="stop"):
    """Terminal: the answer is complete."""

    finish_reason: FinishReason = "stop"


class Error(_Event, frozen=True, tag="error"):
    """Terminal: the job failed. ``code`` is machine-readable, ``category`` drives fallback."""

    code: str
    category: Category
    message: str
    status: int | None = None
    retry_after_s: float | None = None


Event = (Start | TextDelta | ReasoningDelta | ToolCallDelta | Usage | Retrying | QuotaReport
         | Stop | Error)
Terminal = Stop | Error
Content = TextDelta | ToolCallDelta


def is_content(event: Event) -> bool:
    """True for the events that commit a response: text and tool-call deltas."""
    return isinstance(event, (TextDelta, ToolCallDelta))


def is_terminal(event: Event) -> bool:
    return isinstance(event, (Stop, Error))


EVENT_ENCODER: Final = msgspec.json.Encoder()
EVENT_DECODER: Final = msgspec.json.Decoder(Event)
