"""The model routes any key may call: the listing (``GET /v1/models``, ``/v1/models/<id>``),
the three chat dialects on the one engine path (``/v1/chat/completions``, Anthropic's
``/v1/messages``, OpenAI's ``/v1/responses``; see :mod:`._dialect`), ``GET
/v1/responses/<id>`` (always a 404: nothing is stored) and ``/v1/messages/count_tokens``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import trio
from quart import Response, g, request
from quart_trio import QuartTrio

from olp.accounting import LimitExceeded
from olp.engine import Answer, ChainFailed, UnknownModel, UnusableChain
from olp.ir import ChatRequest, ImagePart, TextPart
from olp.ir.anthropic import decode_count_tokens_request, decode_messages_request
from olp.ir.openai import InvalidRequest, decode_chat_request
from olp.ir.responses import decode_responses_request

from . import _chat
from ._dialect import ANTHROPIC, OPENAI, Dialect, OpenAIResponses, visible
from ._errors import ApiError
from ._json_response import JSON, json_response
from ._metrics import Metrics
from ._response_memory import ResponseMemory
from ._services import Services
from ._trace import Trace


def add_routes(app: QuartTrio, services: Services, metrics: Metrics) -> None:
    """Register the model routes on ``app``; each finished request moves ``metrics``."""

    @app.get("/v1/models")
    async def models() -> Response:
        return json_response({"object": "list", "data": services.models()})

    @app.get("/v1/models/<path:model>")
    async def model(model: str) -> Response:
        """One row of the listing, or a 404 naming the cause when the model is known."""
        found = next((m for m in services.models() if m["id"] == model), None)
        if found is not None:
            return json_response(found)
        try:
            services.engine.router.resolve(model)
        except UnknownModel as exc:
            message = exc.message
        else:  # pragma: no cover - every routable id is listed
            message = f"The model `{model}` does not exist or is not served here."
        raise ApiError(404, message, "invalid_request_error", "model_not_found", "model")

    @app.post("/v1/chat/completions")
    async def chat_completions() -> Response:
        return await answer(services, metrics, decode_chat_request, OPENAI)

    @app.post("/v1/messages")
    async def messages() -> Response:
        """Anthropic Messages (``anthropic-version`` and ``anthropic-beta`` are accepted and
        change nothing)."""
        return await answer(services, metrics, decode_messages_request, ANTHROPIC)

    @app.post("/v1/responses")
    async def responses() -> Response:
        """OpenAI Responses. Each answer's conversation is kept for its key, so a later
        request can continue it by ``previous_response_id`` (``store: false`` keeps
        nothing: :mod:`._response_memory`, ADR 0023)."""
        memory = ResponseMemory(services.db, key=str(g.principal.key_id))
        return await answer(services, metrics, decode_responses_request,
                            OpenAIResponses(memory))

    @app.get("/v1/responses/<response_id>")
    async def stored_response(response_id: str) -> Response:
        """OLP keeps an answer's conversation (for ``previous_response_id``), not the
        response object, so none can be fetched."""
        raise ApiError(404, f"No response with id '{response_id}' can be fetched: OLP keeps "
                       "answers only to continue them with 'previous_response_id'.",
                       "invalid_request_error", "response_not_found")

    @app.post("/v1/messages/count_tokens")
    async def count_tokens() -> Response:
        """An estimate (no CLI has a tokenizer to ask): about four characters a token over
        the text, tool definitions and images of the request; ``X-OLP-Token-Count:
        estimate`` says so."""
        chat = decode(decode_count_tokens_request, await read_body(services))
        response = json_response({"input_tokens": estimate_tokens(chat)})
        response.headers.update(_chat.olp_headers(token_count="estimate"))
        return response


async def answer(services: Services, metrics: Metrics,
                 decoder: Callable[[bytes], ChatRequest], dialect: Dialect) -> Response:
    """Decode, run the engine, answer in ``dialect``: the one path of every chat view.
    The request counts against its key's limits from here, whatever its outcome. Blocks until
    the answer (or, streaming, its first content or first heartbeat) is in hand; cancelled,
    the engine's work is cancelled with it."""
    trace: Trace = g.trace
    trace.model_request, trace.dialect = True, dialect.name
    _reserve(services, trace)
    chat = await dialect.prepare(decode(decoder, await read_body(services)))
    trace.requested_model, trace.stream = chat.model, chat.stream
    try:
        context = _chat.context()
        if chat.stream:
            response = await _chat.stream(
                services.engine, chat, context, services.headers,
                heartbeat_s=services.heartbeat_s, background=services.background,
                dialect=dialect, on_end=_stream_end(services, metrics, trace))
            trace.deferred = True
            if response.headers.get("X-OLP-Heartbeat") is None:  # its content is in hand
                trace.first_content_s = trio.current_time() - trace.t0
            return response
        done = await services.engine.complete(chat, context)
        trace.served(provider=done.hop.provider, account=done.hop.account, model=done.model,
                     entry=done.hop.name, index=done.index, cache=done.cache,
                     records=done.records, usage=done.usage, seconds=done.seconds)
        trace.outcome = "truncated" if done.truncated else "ok"
        # the model's thinking only when asked for (streamed: ChatStream drops it)
        response = _chat.complete(chat, replace(done, events=visible(chat, done.events)),
                                  services.headers, dialect)
        if not done.truncated:
            await dialect.answered()
        return response
    except UnusableChain as exc:
        raise ApiError(503, exc.message, "api_error", "chain_unusable", "model") from None
    except UnknownModel as exc:
        raise ApiError(404, exc.message, "invalid_request_error", "model_not_found",
                       "model") from None
    except ChainFailed as exc:
        trace.failed(exc)
        raise _chat.exhausted(chat, exc, services.headers) from None


def decode(decoder: Callable[[bytes], ChatRequest], body: bytes) -> ChatRequest:
    """A request body through its dialect's decoder (each ends in
    :func:`olp.ir._validation.decode_body`), a bad one a 400: the one way every model route
    reads its body, so a body gets the same answer wherever it is sent (too deep nesting
    included: never a ``RecursionError``)."""
    try:
        return decoder(body)
    except InvalidRequest as exc:
        raise ApiError(400, exc.message, "invalid_request_error", exc.code,
                       exc.param) from None


async def read_body(services: Services) -> bytes:
    """The request body of a chat view, after the media type and size checks."""
    mimetype = request.mimetype
    if mimetype != JSON:
        raise ApiError(415, f"Content-Type must be {JSON}, not {mimetype or 'missing'}.",
                       "invalid_request_error", "unsupported_media_type")
    if (request.content_length or 0) > services.max_body_bytes:
        raise ApiError(413, f"Request body is larger than {services.max_body_bytes} bytes.",
                       "invalid_request_error", "request_too_large")
    body = await request.get_data(cache=False)
    assert isinstance(body, bytes)
    g.body_read = True
    return body


def _reserve(services: Services, trace: Trace) -> None:
    """Count the request against its key's limits, or refuse it with a 429."""
    if services.limiter is None:
        return
    limits = _chat.key_policy(g.principal).limits
    try:
        trace.reservation = services.limiter.reserve(str(g.principal.key_id), limits)
    except LimitExceeded as exc:
        trace.refused, trace.rate_headers = True, exc.headers
        raise ApiError(429, exc.message, "rate_limit_error", "rate_limit_exceeded",
                       headers=exc.headers) from None
    trace.rate_headers = trace.reservation.headers


def _stream_end(services: Services, metrics: Metrics, trace: Trace) -> _chat.StreamEnd:
    """What ends ``trace`` once its stream has ended, however it ended."""

    def end(outcome: str, answer: Answer | None, failure: ChainFailed | None) -> None:
        if answer is not None:
            trace.served(provider=answer.hop.provider, account=answer.hop.account,
                         model=answer.model, entry=answer.hop.name, index=answer.index,
                         cache=answer.cache, records=answer.records, usage=answer.usage,
                         seconds=trio.current_time() - answer.started_at)
        if failure is not None:
            trace.failed(failure)
        trace.end(200, outcome, limiter=services.limiter, recorder=services.recorder,
                  metrics=metrics)

    return end


def estimate_tokens(chat: ChatRequest) -> int:
    """About four characters a token over every text part, tool call, tool definition, and
    a flat 1,000 per image (what a CLI hop has no tokenizer to say exactly)."""
    chars = 0
    images = 0
    for message in chat.messages:
        for part in message.content:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, ImagePart):
                images += 1
        chars += sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    chars += sum(len(t.name) + len(t.description or "") + len(json.dumps(t.parameters or {}))
                 for t in chat.tools)
    return max(1, -(-chars // 4)) + 1000 * images
