"""The one HTTP call a refresh makes: a JSON POST to the vendor's token endpoint.

httpx with the process's environment (``HTTPS_PROXY``, ``SSL_CERT_FILE``), no redirects (the
CLIs follow none), a bounded wait. The refresh token travels only in this request's body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from olp import __version__

#: A token endpoint call: (url, JSON body) → (status, the answer's JSON or ``None``). Raises
#: :class:`EndpointUnreachable` when no answer came.
Post = Callable[[str, Mapping[str, Any]], Awaitable[tuple[int, object]]]

TIMEOUT_S = 15.0


class EndpointUnreachable(Exception):
    """No answer from the token endpoint (connection, TLS or a timeout)."""


async def post_json(url: str, body: Mapping[str, Any]) -> tuple[int, object]:
    """POST ``body`` to ``url``; the status and the parsed answer. Blocks up to
    :data:`TIMEOUT_S`; cancellation drops the request."""
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False,
                                     headers={"User-Agent": f"olp/{__version__}"}) as client:
            response = await client.post(url, json=dict(body))
    except httpx.HTTPError as exc:
        raise EndpointUnreachable(f"{type(exc).__name__}: {exc}"[:200]) from exc
    try:
        answer: object = response.json()
    except ValueError:
        answer = None
    return response.status_code, answer
