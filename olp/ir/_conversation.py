"""Conversation identity: which earlier answer a request continues (issue #25, ADR 0023).

Coding agents send the whole conversation again on every turn. A request *continues* an
earlier answer when its messages are that answer's request, then that answer as the client
echoes it back, then new turns. So every request gets a chain of digests, one per message: the
first digest is the conversation's *scope* (the caller's: key, provider, model, login) with
its system text and tools, and each next one hashes the previous digest with one more message.
An answer's *continuation* is the digest the chain will hold at that answer's position on the
next turn: :func:`continuation`. A later request that holds it at one of its assistant
messages (:func:`resume_points`) continues that answer, with the messages after it as its new
turns.

The content is the key: an edited or regenerated history, another system text, other tools
or another key give another digest, so nothing resumes. A client's own name for the
conversation (``ChatRequest.conversation``: ``prompt_cache_key``, Messages
``metadata.user_id``) is part of the seed too: it only ever keeps apart two conversations
whose content matches, and a client that changes it every turn simply never resumes. A
message is compared by what a client keeps when it echoes an answer back: its role, its text
with the surrounding whitespace stripped, its images (by a hash of their URL), its tool calls
(id, name and arguments, JSON re-serialised with sorted keys) and the tool call a result
answers.
Pure and deterministic; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ._request import ChatRequest, ImagePart, Message, TextPart, ToolSpec

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """A place a request could resume from: the digest through its assistant message at
    ``index`` (in the request's non-system messages) and the new turns after it."""

    index: int
    digest: str
    new_turns: tuple[Message, ...]


def digest_chain(request: ChatRequest, scope: str) -> list[str]:
    """The request's digests: ``[seed, after message 1, after message 2, …]`` over its
    non-system messages, the seed covering ``scope``, the system text and the tools."""
    turns = [m for m in request.messages if m.role not in _SYSTEM_ROLES]
    chain = [_seed(request, scope)]
    for message in turns:
        chain.append(_step(chain[-1], message))
    return chain


def continuation(request: ChatRequest, scope: str, answer: Message) -> str:
    """The digest a later request holds right after ``answer`` (the assistant message this
    request was answered with) when it continues this conversation."""
    return _step(digest_chain(request, scope)[-1], answer)


def resume_points(request: ChatRequest, scope: str) -> list[ResumePoint]:
    """Every assistant message of ``request`` that new turns follow, the latest first: the
    candidates a stored session is looked up by."""
    turns = tuple(m for m in request.messages if m.role not in _SYSTEM_ROLES)
    chain = digest_chain(request, scope)
    return [ResumePoint(i, chain[i + 1], turns[i + 1:])
            for i in range(len(turns) - 2, -1, -1) if turns[i].role == "assistant"]


def _seed(request: ChatRequest, scope: str) -> str:
    system = [m.text() for m in request.messages if m.role in _SYSTEM_ROLES]
    named = [] if request.conversation is None else [request.conversation]
    return _hash(["olp-conversation-1", scope, system, _tools(request.tools), *named])


def _step(previous: str, message: Message) -> str:
    return _hash([previous, _canonical(message)])


def _canonical(message: Message) -> list[object]:
    images = [hashlib.sha256(p.url.encode()).hexdigest() for p in message.content
              if isinstance(p, ImagePart)]
    text = "".join(p.text for p in message.content if isinstance(p, TextPart)).strip()
    calls = [[c.id, c.name, _arguments(c.arguments)] for c in message.tool_calls]
    return [message.role, message.name, text, images, calls, message.tool_call_id]


def _arguments(raw: str) -> str:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return raw
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tools(tools: Iterable[ToolSpec]) -> list[object]:
    return [[t.name, t.description, t.parameters] for t in tools]


def _hash(value: Sequence[object]) -> str:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
