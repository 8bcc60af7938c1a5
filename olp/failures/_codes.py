"""Every failure code OLP puts on an :class:`~olp.ir.Error`, a skipped hop or a log line.

A code is machine-readable and stable (clients and dashboards match on it); the *category*
beside it drives fallback. Codes are defined here and nowhere else
(``tests/unit/test_failure_codes.py`` fails on a code string spelled out in another module).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from olp.ir import Category


class Code(StrEnum):
    """A failure code. A ``StrEnum``: it compares equal to, and encodes as, its name."""

    # -- the upstream's answer, as a CLI or an HTTP upstream reported it ------------------
    RATE_LIMITED = "RATE_LIMITED"  # a short 429
    USAGE_WINDOW = "USAGE_WINDOW"  # a subscription window that resets
    BILLING = "BILLING"  # no credit, no reset
    UPSTREAM_AUTH = "UPSTREAM_AUTH"  # the upstream refused the credential
    CONTEXT_LENGTH = "CONTEXT_LENGTH"
    CONTENT_POLICY = "CONTENT_POLICY"
    UPSTREAM_CLIENT_ERROR = "UPSTREAM_CLIENT_ERROR"  # 400/404/413/422
    UPSTREAM_TIMEOUT = "UPSTREAM_TIMEOUT"  # the upstream's own 408/504-style timeout
    UPSTREAM_5XX = "UPSTREAM_5XX"
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"  # a server error without a status
    OVERLOADED = "OVERLOADED"  # 529 / overloaded_error
    CONNECTION_FAILED = "CONNECTION_FAILED"  # refused, reset or closed before an answer
    UPSTREAM_ERROR = "UPSTREAM_ERROR"  # anything unclassifiable (advances the chain)

    # -- a CLI job ------------------------------------------------------------------------
    AUTH_MISSING = "AUTH_MISSING"  # no credential found (before spawning, or "not logged in")
    CLI_NOT_FOUND = "CLI_NOT_FOUND"
    SPAWN_FAILED = "SPAWN_FAILED"
    CLI_FAILED = "CLI_FAILED"  # a non-zero exit the CLI did not explain
    CLI_TERMINATED = "CLI_TERMINATED"  # killed by a signal it did not expect
    CONFIG_ERROR = "CONFIG_ERROR"  # the CLI refused the configuration OLP gave it
    PROTOCOL_ERROR = "PROTOCOL_ERROR"  # output OLP cannot parse
    OUTPUT_TOO_LONG = "OUTPUT_TOO_LONG"  # one output line over the reader's limit
    STREAM_ABANDONED = "STREAM_ABANDONED"  # claude gave up a silent upstream stream
    CAPABILITY = "CAPABILITY"  # the request needs something this hop cannot do
    LOCKDOWN_FAILED = "LOCKDOWN_FAILED"  # skipped: the CLI has not passed its self-check
    LOGIN_EXPIRED = "LOGIN_EXPIRED"  # the login's refresh was refused for good: log in again
    LOGIN_REFRESH_FAILED = "LOGIN_REFRESH_FAILED"  # its token ended and a refresh failed for now

    # -- tool calls on a CLI hop (the bridge and the tool gate) ----------------------------
    TOOL_CALL_INVALID = "TOOL_CALL_INVALID"  # an unknown tool, or arguments not a JSON object
    TOOL_CHOICE_UNMET = "TOOL_CHOICE_UNMET"  # a forced tool_choice the model did not make
    TOOL_BRIDGE_FAILED = "TOOL_BRIDGE_FAILED"  # the CLI started without the tools' MCP server

    # -- the proxy's own deadlines (CLI and HTTP runners alike) ---------------------------
    FIRST_OUTPUT_TIMEOUT = "FIRST_OUTPUT_TIMEOUT"
    IDLE_TIMEOUT = "IDLE_TIMEOUT"
    TOTAL_TIMEOUT = "TOTAL_TIMEOUT"

    # -- an HTTP upstream's transport -----------------------------------------------------
    CONNECT_TIMEOUT = "CONNECT_TIMEOUT"  # no TCP/TLS connection within the connect deadline
    FIRST_BYTE_TIMEOUT = "FIRST_BYTE_TIMEOUT"  # no response headers in time
    STREAM_ENDED_EARLY = "STREAM_ENDED_EARLY"  # the body ended (or broke) before a finish
    REQUEST_FAILED = "REQUEST_FAILED"  # the request could not be sent (bad URL, ...)

    # -- the actor, the cache's flights and the engine ------------------------------------
    CONCURRENCY_LIMIT = "CONCURRENCY_LIMIT"  # every spawn slot busy (a skip, not an attempt)
    INTERNAL_ERROR = "INTERNAL_ERROR"  # a bug in OLP; logged with its traceback
    CANCELLED = "CANCELLED"  # the flight's runner shut down
    CLIENT_TOO_SLOW = "CLIENT_TOO_SLOW"  # a follower fell too far behind a shared flight
    SOURCE_FAILED = "SOURCE_FAILED"  # a flight could not start its job
    JOB_LOST = "JOB_LOST"  # a job's stream ended without a terminal event
    RETRY_ABANDONED = "RETRY_ABANDONED"  # a CLI's own retry storm, cut short for the next hop
    COOLDOWN = "COOLDOWN"  # skipped: the provider rests until a usage window resets
    CIRCUIT_OPEN = "CIRCUIT_OPEN"  # skipped: it failed repeatedly, probing later
    SOFT_TRIGGER = "SOFT_TRIGGER"  # skipped: an owner-set budget threshold was reached
    CONTEXT_WINDOW = "CONTEXT_WINDOW"  # skipped: a larger context window comes later
    KEY_POLICY = "KEY_POLICY"  # skipped: the API key's allow-list excludes the provider
    ALL_HOPS_COOLING = "ALL_HOPS_COOLING"  # no hop was tried: every one is resting


#: The category a code always has where it is synthesised without an upstream's say.
#: (Codes classified from upstream output carry the category their rule gave.)
DEFAULT_CATEGORY: Final[Mapping[Code, Category]] = {
    Code.RATE_LIMITED: "rate_limited",
    Code.USAGE_WINDOW: "usage_window",
    Code.BILLING: "billing",
    Code.UPSTREAM_AUTH: "auth",
    Code.CONTEXT_LENGTH: "context_length",
    Code.CONTENT_POLICY: "client_error",
    Code.UPSTREAM_CLIENT_ERROR: "client_error",
    Code.UPSTREAM_TIMEOUT: "unavailable",
    Code.UPSTREAM_5XX: "unavailable",
    Code.UPSTREAM_UNAVAILABLE: "unavailable",
    Code.OVERLOADED: "unavailable",
    Code.CONNECTION_FAILED: "unavailable",
    Code.UPSTREAM_ERROR: "unknown",
    Code.AUTH_MISSING: "auth",
    Code.CLI_NOT_FOUND: "unavailable",
    Code.SPAWN_FAILED: "unavailable",
    Code.CLI_FAILED: "unknown",
    Code.CLI_TERMINATED: "unavailable",
    Code.CONFIG_ERROR: "auth",
    Code.PROTOCOL_ERROR: "unknown",
    Code.OUTPUT_TOO_LONG: "unknown",
    Code.STREAM_ABANDONED: "unavailable",
    Code.CAPABILITY: "client_error",
    Code.LOCKDOWN_FAILED: "unavailable",
    Code.LOGIN_EXPIRED: "auth",
    Code.LOGIN_REFRESH_FAILED: "unavailable",
    Code.TOOL_CALL_INVALID: "unavailable",
    Code.TOOL_CHOICE_UNMET: "unavailable",
    Code.TOOL_BRIDGE_FAILED: "unavailable",
    Code.FIRST_OUTPUT_TIMEOUT: "unavailable",
    Code.IDLE_TIMEOUT: "unavailable",
    Code.TOTAL_TIMEOUT: "unavailable",
    Code.CONNECT_TIMEOUT: "unavailable",
    Code.FIRST_BYTE_TIMEOUT: "unavailable",
    Code.STREAM_ENDED_EARLY: "unavailable",
    Code.REQUEST_FAILED: "unavailable",
    Code.CONCURRENCY_LIMIT: "unavailable",
    Code.INTERNAL_ERROR: "unknown",
    Code.CANCELLED: "unavailable",
    Code.CLIENT_TOO_SLOW: "unknown",
    Code.SOURCE_FAILED: "unavailable",
    Code.JOB_LOST: "unknown",
    Code.RETRY_ABANDONED: "unavailable",
    Code.COOLDOWN: "usage_window",
    Code.CIRCUIT_OPEN: "unavailable",
    Code.SOFT_TRIGGER: "usage_window",
    Code.CONTEXT_WINDOW: "context_length",
    Code.KEY_POLICY: "client_error",
    Code.ALL_HOPS_COOLING: "rate_limited",
}
