"""The chat views' answers (``/v1/chat/completions``, ``/v1/messages``): the engine's answer as
SSE or JSON in the request's dialect (:mod:`._dialect`), with OLP's headers."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import quote

import trio
from quart import Response, g, request

from olp.engine import (
    Answer,
    CacheMode,
    ChainFailed,
    Completion,
    Engine,
    Hop,
    HopRecord,
    RequestContext,
    detail_header,
)
from olp.ir import ChatRequest
from olp.store import UNRESTRICTED, KeyPolicy

from ._chat_stream import ChatStream, PendingAnswer
from ._dialect import OPENAI, Dialect
from ._errors import ApiError, chain_error

log = logging.getLogger("olp.http")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: The most bytes one ``X-OLP-*`` value may take once encoded (a name: a model, a provider,
#: one ignored parameter); the most a whole list takes (``X-OLP-Ignored-Params``,
#: ``-Fallback-Exhausted``); the most the JSON of ``X-OLP-Fallback-Detail`` takes (what
#: :func:`~olp.engine.detail_header` already keeps it to). Together OLP's headers stay under
#: about 6.5 KB, within the 8 KiB many clients and proxies allow a response's head.
VALUE_CAP: Final = 256
LIST_CAP: Final = 1024
JSON_CAP: Final = 4096
#: What ends a value or a list cut short: ``…``, percent-encoded (an unquote shows it).
CUT: Final = quote("\u2026")
OLP_PREFIX: Final = "X-OLP-"
_VISIBLE: Final = frozenset(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")
_IN_LIST: Final = _VISIBLE - {","}
#: Visible ASCII but ``%``: a value made only of these is its own encoding.
_PLAIN: Final = re.compile(r"[\x21-\x24\x26-\x7e]*\Z")


@dataclass(frozen=True, slots=True)
class HeaderPolicy:
    """Who sees ``X-OLP-Fallback-Detail`` (``owner_only``, ``all`` or ``none``) and which
    providers are metered (for ``X-OLP-Credential``)."""

    detail: str = "owner_only"
    metered: frozenset[str] = frozenset()

    def detail_allowed(self, tier: str) -> bool:
        return self.detail == "all" or (self.detail == "owner_only" and tier == "owner")


def header_value(text: str, cap: int = VALUE_CAP) -> str:
    """``text`` as a safe, bounded ASCII header value: the one encoder of every ``X-OLP-*``
    value (each is set through :func:`olp_headers`).

    Every character outside visible ASCII (controls such as CR, LF and NUL, space, DEL,
    non-ASCII) and ``%`` itself is percent-encoded as UTF-8 (RFC 3986), so any URL unquote
    gives the text back; visible ASCII other than ``%`` is unchanged. A value whose encoding
    would pass ``cap`` bytes (:data:`VALUE_CAP`, 256) is cut at a character boundary and ends
    with :data:`CUT` (``%E2%80%A6``, an encoded ``…``), the whole within ``cap``."""
    return _encode(text, cap, _VISIBLE)


def header_list(items: Iterable[str], cap: int = LIST_CAP) -> str:
    """``items`` as one comma-separated header value: each through :func:`header_value`
    (a comma in an item is encoded too, ``%2C``, so the list splits back), the whole at most
    ``cap`` bytes (:data:`LIST_CAP`, 1,024): the items that fit, then :data:`CUT` as a last
    item when some were left off."""
    out: list[str] = []
    size = fits = 0
    for item in items:
        piece = _encode(item, VALUE_CAP, _IN_LIST)
        size += len(piece) + (1 if out else 0)
        if size > cap:
            return ",".join([*out[:fits], CUT])
        out.append(piece)
        if size + 1 + len(CUT) <= cap:
            fits = len(out)
    return ",".join(out)


class JsonValue(str):
    """A value already written as ASCII JSON (:func:`~olp.engine.detail_header`, whose
    messages hold spaces): kept as it is when it is printable ASCII within :data:`JSON_CAP`
    bytes, else encoded and cut like any other value (never the case today)."""


#: What :func:`olp_headers` takes: text, a number, a list of names, JSON, or nothing.
OlpValue = str | int | Sequence[str] | None


def olp_headers(**values: OlpValue) -> dict[str, str]:
    """OLP's response headers: the only way any ``X-OLP-*`` header is set (a unit test scans
    ``olp`` for any other). ``requested_model=...`` is ``X-OLP-Requested-Model``; a string
    goes through :func:`header_value`, a list or tuple through :func:`header_list`, a number
    is its digits, a :class:`JsonValue` is checked; ``None`` leaves the header out. So
    whatever a client or the config put in a value, the header is visible ASCII (plus spaces
    in JSON) and bounded: :data:`VALUE_CAP` a value, :data:`LIST_CAP` a list,
    :data:`JSON_CAP` the JSON."""
    headers: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        name = _header_name(key)
        if isinstance(value, JsonValue):
            printable = all(" " <= c < "\x7f" for c in value)
            headers[name] = str(value) if printable and len(value) <= JSON_CAP else \
                header_value(value, JSON_CAP)
        elif isinstance(value, str):
            headers[name] = header_value(value)
        elif isinstance(value, int):
            headers[name] = str(int(value))
        else:
            headers[name] = header_list(value)
    return headers


@functools.cache
def _header_name(key: str) -> str:
    """``requested_model`` → ``X-OLP-Requested-Model`` (the keys are the code's own: few)."""
    return OLP_PREFIX + "-".join(word.capitalize() for word in key.split("_"))


def _encode(text: str, cap: int, safe: frozenset[str]) -> str:
    """``text`` percent-encoded but for the ``safe`` characters, cut to ``cap`` bytes with
    :data:`CUT` when it is longer (looks at no more than ``cap`` characters)."""
    if len(text) <= cap and _PLAIN.match(text) and (
            safe is _VISIBLE or (safe is _IN_LIST and "," not in text)):
        return text  # the usual case (a model or provider name): nothing to encode
    out: list[str] = []
    size = fits = 0
    for c in text:
        piece = c if c in safe else quote(c, safe="", errors="surrogatepass")
        size += len(piece)
        if size > cap:
            return "".join(out[:fits]) + CUT
        out.append(piece)
        if size + len(CUT) <= cap:
            fits = len(out)
    return "".join(out)


def _elapsed_ms(t0: float) -> str:
    return str(round((trio.current_time() - t0) * 1000))


def _headers(chat: ChatRequest, hop: Hop, index: int, records: list[HopRecord],
             ignored: tuple[str, ...], policy: HeaderPolicy, cache: str,
             session: str | None = None) -> dict[str, str]:
    """OLP's headers of an answer; ``X-OLP-Session`` only for one this request's own spawn
    gave (an answer from the cache, or shared with an identical request, resumed nothing)."""
    return olp_headers(
        requested_model=chat.model, provider_used=hop.provider, model_used=hop.model,
        served_by=hop.name, fallback_hops=index, cache=cache,
        account=hop.account if _named(hop.provider, hop.account, policy) else None,
        credential="metered" if hop.slot in policy.metered else "subscription",
        latency_ms=_elapsed_ms(g.t0), ignored_params=ignored or None,
        session=session if cache in ("miss", "bypass") else None,
        fallback_detail=_detail(records, policy))


def _named(provider: str, account: str, policy: HeaderPolicy) -> bool:
    """Whether this request's key may learn the account's name (``X-OLP-Account``, the
    fallback detail): under the detail's policy, the owner always, anyone else only for an
    account their key is bound to (a guest never learns another person's account)."""
    tier = g.principal.tier
    return policy.detail_allowed(tier) and (
        tier == "owner" or (provider, account) in key_policy(g.principal).accounts)


def _detail(records: list[HopRecord], policy: HeaderPolicy) -> JsonValue | None:
    """``X-OLP-Fallback-Detail``, when there is a trail and this key may see it; an account
    the key may not learn is shown as ``-``."""
    if records and policy.detail_allowed(g.principal.tier):
        return JsonValue(detail_header([
            r if _named(r.provider, r.account, policy) else replace(r, account="-")
            for r in records]))
    return None


def exhausted(chat: ChatRequest, exc: ChainFailed, policy: HeaderPolicy) -> ApiError:
    """The response when no hop answered (see :func:`._errors.chain_error`), with OLP's
    headers; logs the request."""
    failure = chain_error(chat, exc, public=_public())
    hop = failure.hop
    tried = exc.tried or list(dict.fromkeys(h.provider for h in exc.route.hops))
    headers = {**failure.error.headers, **olp_headers(
        requested_model=chat.model, provider_used=hop.provider, model_used=hop.model,
        fallback_hops=max(0, len(exc.records) - 1), cache="bypass",
        fallback_exhausted=list(tried), latency_ms=_elapsed_ms(g.t0),
        fallback_detail=_detail(exc.records, policy))}
    error = replace(failure.error, headers=headers)
    log_request(chat, hop.provider, hop.model, error.status, failure.log_code,
                error=failure.detail)
    return error


def _public() -> bool:
    """Whether this request's key is not the owner's: its errors carry no upstream text."""
    return bool(g.principal.tier != "owner")


#: Told how a stream ended: its outcome, the answer that streamed, a pending chain's failure.
StreamEnd = Callable[[str, Answer | None, ChainFailed | None], None]


def _ignore_end(outcome: str, answer: Answer | None, failure: ChainFailed | None) -> None:
    pass


async def stream(engine: Engine, chat: ChatRequest, context: RequestContext,
                 policy: HeaderPolicy, *, heartbeat_s: float = 0.0,
                 background: trio.Nursery | None = None,
                 dialect: Dialect = OPENAI, on_end: StreamEnd = _ignore_end) -> Response:
    """The answer as SSE, returned once its first content is in hand (so a failure before
    that is still a status; raises :class:`ChainFailed` or ``UnknownModel``). ``on_end`` is
    called once when the stream ends (after its log line), however it ends.

    With ``heartbeat_s`` > 0 and a ``background`` nursery for the engine's work: if no
    content came within one interval, a 200 is committed instead and keep-alives flow until
    it does (see :mod:`._chat_stream`).
    """
    if heartbeat_s <= 0 or background is None:
        return _answer_response(chat, await engine.open(chat, context), policy, None,
                                dialect, on_end)
    pending = PendingAnswer(engine, chat, context)
    background.start_soon(pending.run)
    try:
        with trio.move_on_after(heartbeat_s):
            return _answer_response(chat, await pending.result(), policy, heartbeat_s,
                                    dialect, on_end)
    except BaseException:
        pending.cancel()
        raise
    headers = {**SSE_HEADERS, **olp_headers(requested_model=chat.model, heartbeat="true",
                                            latency_ms=_elapsed_ms(g.t0))}
    return _sse_response(ChatStream(chat, pending, _stream_logger(chat, on_end),
                                    heartbeat_s=heartbeat_s, public_errors=_public(),
                                    dialect=dialect), headers)


def _answer_response(chat: ChatRequest, answer: Answer, policy: HeaderPolicy,
                     heartbeat_s: float | None, dialect: Dialect,
                     on_end: StreamEnd) -> Response:
    headers = {**SSE_HEADERS, **_headers(chat, answer.hop, answer.index, answer.records,
                                         answer.ignored_params, policy, answer.cache,
                                         answer.session)}
    return _sse_response(ChatStream(chat, answer, _stream_logger(chat, on_end),
                                    heartbeat_s=heartbeat_s, public_errors=_public(),
                                    dialect=dialect), headers)


def _sse_response(body: ChatStream, headers: dict[str, str]) -> Response:
    response = Response(body, status=200, headers=headers, content_type="text/event-stream")
    response.timeout = None  # Quart's RESPONSE_TIMEOUT (60 s) would silently cut the stream
    return response


def _stream_logger(chat: ChatRequest, then: StreamEnd) -> ChatStream.OnEnd:
    t0, key = g.t0, g.principal.name  # the request context is gone while the body streams

    def on_end(outcome: str, answer: Answer | None, failure: ChainFailed | None) -> None:
        log_request(chat, answer.hop.provider if answer else "-",
                    answer.model if answer else "-", 200, outcome, key=key,
                    seconds=trio.current_time() - t0,
                    ignored=answer.ignored_params if answer else ())
        then(outcome, answer, failure)

    return on_end


def complete(chat: ChatRequest, done: Completion, policy: HeaderPolicy,
             dialect: Dialect = OPENAI) -> Response:
    body = dialect.complete(done.events, done.model)
    headers = _headers(chat, done.hop, done.index, done.records, done.ignored_params, policy,
                       done.cache, done.session)
    headers.update(olp_headers(truncated="true" if done.truncated else None))
    log_request(chat, done.hop.provider, done.model, 200, "truncated" if done.truncated
                else "ok", ignored=done.ignored_params)
    return Response(body, status=200, content_type="application/json",
                    headers=headers)


def context() -> RequestContext:
    """The engine's view of this request: the caller's cache namespace (its key's id) and
    the client's ``Cache-Control`` (``no-store`` wins over ``no-cache``), and the key's
    provider allow-list and account binding."""
    directives = {d.strip().lower() for d in
                  request.headers.get("Cache-Control", "").split(",")}
    mode: CacheMode = "no-store" if "no-store" in directives else \
        "no-cache" if "no-cache" in directives else "default"
    policy = key_policy(g.principal)
    return RequestContext(namespace=str(g.principal.key_id), cache_mode=mode,
                          providers=policy.providers, accounts=policy.accounts)


def key_policy(principal: object) -> KeyPolicy:
    """The principal's :class:`~olp.store.KeyPolicy` (one without, such as the anonymous
    guest, is unrestricted)."""
    policy = getattr(principal, "policy", UNRESTRICTED)
    return policy if isinstance(policy, KeyPolicy) else UNRESTRICTED


def log_request(chat: ChatRequest, provider: str, model: str, status: int, outcome: str,
                *, key: str | None = None, seconds: float | None = None,
                error: str | None = None, ignored: tuple[str, ...] = ()) -> None:
    """One line per chat request: who, which hop, how it ended, for a failure what the hop
    said (``error``, whatever the client was told), and what the hop answered without
    (``ignored``, as in ``X-OLP-Ignored-Params``). Never the prompt."""
    elapsed = seconds if seconds is not None else trio.current_time() - g.t0
    extra = {"event": "chat", "key": key or g.principal.name, "requested_model": chat.model,
             "provider": provider, "model": model, "stream": chat.stream, "status": status,
             "outcome": outcome, "ms": round(elapsed * 1000)}
    if error:
        extra["error"] = error
    if ignored:
        extra["ignored"] = list(ignored)
    log.info("chat completion", extra=extra)

