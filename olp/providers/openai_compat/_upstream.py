"""The one request a runner sends, prepared once and handed straight to httpx's transport.

``client.build_request`` followed by ``client.send`` redoes per request what never changes
for a runner (parsing and merging the URL, merging the client's headers, the cookie jar) and
runs flows the runner never uses (auth, redirects, storing response cookies). :class:`Upstream`
builds the fixed part of the request once, per job adds only the body and its length, and
sends it through the transport the client would pick for the URL (its connection pool, or
the proxy ``trust_env`` found), with the client's timeout. Upstream cookies are not kept
between jobs: a proxy serving many callers must not carry one upstream session into another.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from ._body import OneShot


class Upstream:
    """POSTs JSON bodies to one URL through ``client``'s transport.

    ``headers`` go on every request, over the client's own (the same merge as
    ``client.build_request``); ``Host`` and ``Content-Length`` are added per request.
    """

    def __init__(self, client: httpx.AsyncClient, url: str, headers: Mapping[str, str]) -> None:
        self.client = client
        self.url = httpx.URL(url)
        self._headers = headers
        self._fixed: list[tuple[bytes, bytes]] | None = None
        # httpx (pinned in pyproject.toml) has no public name for the transport a client
        # picks for a URL: the pool, or a proxy's when trust_env found one for it.
        self._transport = client._transport_for_url(self.url)
        self._extensions = {"timeout": client.timeout.as_dict()}

    def fixed_headers(self) -> list[tuple[bytes, bytes]]:
        """``Host``, then the client's headers updated with the runner's. Raises
        ``ValueError`` for a value that is not ASCII (e.g. a pasted key)."""
        if self._fixed is None:
            merged = httpx.Headers(self.client.headers)
            merged.update(self._headers)
            self._fixed = [(b"Host", self.url.netloc), *merged.raw]
        return self._fixed

    def build(self, body: bytes) -> httpx.Request:
        """The request for ``body``; raises ``ValueError`` like :meth:`fixed_headers`."""
        fixed = self.fixed_headers()
        headers = [fixed[0], (b"Content-Length", b"%d" % len(body)), *fixed[1:]]
        return httpx.Request("POST", self.url, headers=headers, stream=OneShot(body),
                             extensions=self._extensions)

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; the response's body is left to stream. Raises
        :class:`httpx.HTTPError` (a transport failure) or ``RuntimeError`` (client closed)."""
        if self.client.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        response = await self._transport.handle_async_request(request)
        response.request = request
        return response
