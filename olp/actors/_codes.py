"""Failure codes the actor layer synthesises (adapters add their own upstream codes)."""

from __future__ import annotations

from typing import Final

CONCURRENCY_LIMIT: Final = "CONCURRENCY_LIMIT"
AUTH_MISSING: Final = "AUTH_MISSING"
CLI_NOT_FOUND: Final = "CLI_NOT_FOUND"
SPAWN_FAILED: Final = "SPAWN_FAILED"
FIRST_OUTPUT_TIMEOUT: Final = "FIRST_OUTPUT_TIMEOUT"
IDLE_TIMEOUT: Final = "IDLE_TIMEOUT"
TOTAL_TIMEOUT: Final = "TOTAL_TIMEOUT"
CLI_FAILED: Final = "CLI_FAILED"
PROTOCOL_ERROR: Final = "PROTOCOL_ERROR"
OUTPUT_TOO_LONG: Final = "OUTPUT_TOO_LONG"
