"""Responses ``previous_response_id``: answers kept for the key that asked (ADR 0023).

A :class:`ResponseMemory` belongs to one ``POST /v1/responses`` request. It names the answer
(its ``resp_…`` id is the one the client sees), puts a named earlier answer's conversation in
front of the request's ``input`` (:meth:`expand`: a 400 when this key has no such answer),
and keeps this answer's conversation once it has ended cleanly (:meth:`keep`, awaited before
the last frame or the body goes out, so a client that continues at once finds it). A request
continued this way is the same request as one that sent the conversation whole: the response
cache, singleflight and a kept CLI session all see no difference.

``instructions`` are not carried over (as OpenAI's API does): each request's own are its
system text. ``store: false`` keeps nothing. Without a database nothing is kept either, and
every ``previous_response_id`` is unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec

from olp.ir import ChatRequest, Message
from olp.ir.responses import response_id
from olp.store import AsyncResponseStore, Database, ResponseStore

from ._errors import ApiError

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODER: Final = msgspec.msgpack.Decoder(tuple[Message, ...])


class ResponseMemory:
    """One Responses request's part in ``previous_response_id`` (see the module docstring).
    ``key``: the API key's id, the only key whose requests may name this answer."""

    def __init__(self, db: Database | None, *, key: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.id = response_id()
        self._store = AsyncResponseStore(ResponseStore(db)) if db is not None else None
        self._key = key
        self._clock = clock
        self._chat: ChatRequest | None = None

    async def expand(self, chat: ChatRequest) -> ChatRequest:
        """``chat`` with the conversation of the answer it names in front of its turns (after
        its own system text); the request to answer and, later, to keep. Raises a 400
        :class:`ApiError` when this key kept no such answer. Waits on the store (a thread)."""
        if chat.previous_response_id is not None:
            found = None if self._store is None else await self._store.get(
                chat.previous_response_id, key=self._key, now=self._clock())
            history = _decode(found) if found is not None else None
            if history is None:
                raise ApiError(400, f"Previous response with id '{chat.previous_response_id}' "
                               "not found.", "invalid_request_error",
                               "previous_response_not_found", "previous_response_id")
            system = tuple(m for m in chat.messages if m.role in _SYSTEM_ROLES)
            turns = tuple(m for m in chat.messages if m.role not in _SYSTEM_ROLES)
            chat = msgspec.structs.replace(chat, messages=(*system, *history, *turns),
                                           previous_response_id=None)
        self._chat = chat
        return chat

    async def keep(self, answer: Message) -> None:
        """Keep the conversation through ``answer`` under :attr:`id` (not with ``store:
        false``). Waits on the store (a thread that finishes even if this is cancelled)."""
        chat = self._chat
        if self._store is None or chat is None or not chat.store:
            return
        history = tuple(m for m in chat.messages if m.role not in _SYSTEM_ROLES)
        await self._store.put(self.id, key=self._key, history=_ENCODER.encode(
            (*history, answer)), now=self._clock())


def _decode(blob: bytes) -> tuple[Message, ...] | None:
    try:
        return _DECODER.decode(blob)
    except msgspec.DecodeError:  # written by another version: as good as unknown
        return None
