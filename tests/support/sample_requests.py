"""IR requests the tests build over and over: one user message, a model name."""

from __future__ import annotations

from olp.ir import ChatRequest, Message, TextPart


def user_says(text: str = "hi", *, model: str = "m") -> ChatRequest:
    """A chat request holding one user message with ``text``, asking for ``model``."""
    message = Message(role="user", content=(TextPart(text=text),))
    return ChatRequest(model=model, messages=(message,))
