"""Failure codes of the ``openai-compatible`` provider (the actor layer's own are in
:mod:`olp.actors._codes`: ``FIRST_OUTPUT_TIMEOUT``, ``IDLE_TIMEOUT``, ``TOTAL_TIMEOUT``, ...)."""

from __future__ import annotations

from typing import Final

# transport
CONNECT_TIMEOUT: Final = "CONNECT_TIMEOUT"  # no TCP/TLS connection within connect_s
FIRST_BYTE_TIMEOUT: Final = "FIRST_BYTE_TIMEOUT"  # no response headers within first_byte_s
CONNECTION_FAILED: Final = "CONNECTION_FAILED"  # refused, reset or closed before the headers
STREAM_ENDED_EARLY: Final = "STREAM_ENDED_EARLY"  # the body ended (or broke) before a finish
REQUEST_FAILED: Final = "REQUEST_FAILED"  # the request could not be sent (bad URL, ...)

# the upstream's answer
RATE_LIMITED: Final = "RATE_LIMITED"
USAGE_WINDOW: Final = "USAGE_WINDOW"
BILLING: Final = "BILLING"
UPSTREAM_AUTH: Final = "UPSTREAM_AUTH"
CONTEXT_LENGTH: Final = "CONTEXT_LENGTH"
CONTENT_POLICY: Final = "CONTENT_POLICY"
UPSTREAM_CLIENT_ERROR: Final = "UPSTREAM_CLIENT_ERROR"
UPSTREAM_TIMEOUT: Final = "UPSTREAM_TIMEOUT"  # the upstream's own 408/504-style timeout
UPSTREAM_5XX: Final = "UPSTREAM_5XX"
UPSTREAM_UNAVAILABLE: Final = "UPSTREAM_UNAVAILABLE"  # an in-stream server error, no status
UPSTREAM_ERROR: Final = "UPSTREAM_ERROR"  # anything unclassifiable (advances the chain)
