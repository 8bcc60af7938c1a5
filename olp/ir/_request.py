"""The request half of the IR: what a client asked for, independent of any wire format."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Role = Literal["system", "developer", "user", "assistant", "tool"]


class _IR(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base for internal IR values: we produce them, so an unknown field is a bug."""


class TextPart(_IR, frozen=True, tag="text", tag_field="type", omit_defaults=True):
    text: str
    cache_control: dict[str, Any] | None = None  # an Anthropic prompt-caching marker, if sent


class ImagePart(_IR, frozen=True, tag="image", tag_field="type"):
    """An image by URL (``https:`` or ``data:`` URL), as OpenAI's ``image_url`` part."""

    url: str
    detail: str | None = None


Part = TextPart | ImagePart


class ToolCall(_IR, frozen=True):
    """A tool call the assistant made earlier in the conversation."""

    id: str
    name: str
    arguments: str


class Message(_IR, frozen=True):
    role: Role
    content: tuple[Part, ...] = ()
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def text(self) -> str:
        """The concatenated text parts (images are not text)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class ToolSpec(_IR, frozen=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


#: How hard the model thinks, one scale for every dialect (issue #27, ADR 0026).
Effort = Literal["none", "minimal", "low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = ("none", "minimal", "low", "medium", "high")


class Reasoning(_IR, frozen=True, omit_defaults=True):
    """What the client asked of the model's thinking (issue #27).

    ``effort``: chat ``reasoning_effort``, Responses ``reasoning.effort``, Messages
    ``output_config.effort``; a Messages ``thinking`` of type ``enabled`` maps its
    ``budget_tokens`` to the nearest level (:func:`effort_for_budget`), ``disabled`` to
    ``none``, ``adaptive`` to no level (the model's own choice). ``budget_tokens``: the
    Messages budget as sent. ``summary``: Responses ``reasoning.summary`` (``auto``,
    ``concise``, ``detailed``). ``show``: the client wants the model's thinking back (a
    Messages ``thinking`` that is not ``disabled``, a Responses summary, a chat
    ``reasoning_effort`` other than ``none``)."""

    effort: Effort | None = None
    budget_tokens: int | None = None
    summary: str | None = None
    show: bool = False


def effort_for_budget(budget_tokens: int) -> Effort:
    """The level nearest a thinking budget: up to 4,096 tokens ``low``, up to 16,384
    ``medium``, more ``high`` (ADR 0026)."""
    return "low" if budget_tokens <= 4096 else "medium" if budget_tokens <= 16384 else "high"


class ChatRequest(_IR, frozen=True):
    """One chat completion request, normalised.

    Sampling parameters are ``None`` when the client did not send them, so a hop can tell
    "not asked for" from "asked for the default" (and name what it ignored).
    """

    model: str
    messages: tuple[Message, ...]
    stream: bool = False
    include_usage: bool = False
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None  # None: not sent (OpenAI's default allows several)
    response_format: dict[str, Any] | None = None
    user: str | None = None
    #: What the client sent that the dialect could not carry to any hop (named in
    #: ``X-OLP-Ignored-Params``): a Responses request's tools that are not functions, say
    #: ``tools.apply_patch`` (codex's freeform tool) or ``tools.web_search``.
    dropped: tuple[str, ...] = ()
    #: The client's own name for the conversation (chat and Responses ``prompt_cache_key``,
    #: Messages ``metadata.user_id``): part of the conversation's identity, so two
    #: conversations with the same history but different names never share a kept CLI
    #: session (``olp/ir/_conversation.py``). Not part of the response cache's key.
    conversation: str | None = None
    #: Responses ``previous_response_id``: the answer this request continues; the HTTP edge
    #: puts that answer's conversation before ``messages`` and clears it.
    previous_response_id: str | None = None
    #: Responses ``store: false``: this answer is not kept for a later
    #: ``previous_response_id``.
    store: bool = True
    #: How hard the model should think, and whether its thinking is wanted back (#27).
    reasoning: Reasoning | None = None

    def sampling_params_set(self) -> tuple[str, ...]:
        """Names of the sampling parameters the client set (CLI hops ignore these, loudly)."""
        names = ("temperature", "top_p", "max_tokens", "seed", "presence_penalty",
                 "frequency_penalty")
        found = [n for n in names if getattr(self, n) is not None]
        if self.stop:
            found.append("stop")
        return tuple(found)

    def has_cache_control_markers(self) -> bool:
        """Whether a text part carries an Anthropic ``cache_control`` marker (as clients of
        OpenAI-compatible gateways send them): the request asks for Anthropic's own prompt
        caching. The cache keys such requests apart, and an anthropic hop runs them instead
        of replaying a stored answer (docs/adr/0006-cache.md)."""
        return any(isinstance(p, TextPart) and p.cache_control is not None
                   for m in self.messages for p in m.content)
