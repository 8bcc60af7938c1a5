"""How one ``openai-compatible`` provider is reached: URL, key, deadlines, retries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from olp.actors._deadline import Timeouts

from ._retry import RetryPolicy

#: Default deadlines for HTTP hops (mirrors ``olp.config``'s ``HTTP_TIMEOUTS``; docs/adr/0008).
HTTP_TIMEOUTS = Timeouts(first_output_s=120.0, idle_s=120.0, total_s=600.0)


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """One provider's upstream. ``repr`` never shows the key.

    Deadlines, all per hop and all ``unavailable`` when they expire: ``connect_s`` (TCP and
    TLS), ``first_byte_s`` (until the response headers, from the start of each attempt),
    ``timeouts.first_output_s`` (until the first content, from the start of the hop),
    ``timeouts.idle_s`` (the longest gap between SSE events once content has flowed) and
    ``timeouts.total_s`` (the whole hop, retries included).

    ``api_key_env`` only names where the key should have come from: when it is set and
    ``api_key`` is ``None``, jobs fail at once with ``AUTH_MISSING``. ``headers`` are added to
    every request (e.g. OpenRouter's ``HTTP-Referer``). ``max_tokens_field`` is the body field
    the request's ``max_tokens`` goes in (newer OpenAI models want ``max_completion_tokens``).
    ``trust_env`` lets httpx read ``HTTPS_PROXY``/``SSL_CERT_FILE`` and friends.
    """

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    timeouts: Timeouts = HTTP_TIMEOUTS
    connect_s: float = 10.0
    first_byte_s: float = 60.0
    retry: RetryPolicy = RetryPolicy()
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    trust_env: bool = True
    name: str = "openai-compatible"  # for log records only
    max_error_body_bytes: int = 64 * 1024
    max_event_bytes: int = 8 * 1024 * 1024
    max_json_body_bytes: int = 16 * 1024 * 1024

    @property
    def url(self) -> str:
        """The chat completions endpoint: ``{base_url}/chat/completions``."""
        return self.base_url.rstrip("/") + "/chat/completions"
