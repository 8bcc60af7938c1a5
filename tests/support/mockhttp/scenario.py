"""What every mock's ``Scenario`` shares: building one from options, showing it as JSON, and
the checks of the options every mock has."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

import trio

from ._headers import checked_headers

DEFAULT_DELTAS: tuple[str, ...] = ("Hello", " from", " the mock", " upstream.")
INPUT_TOKENS = 25  # the usage the mocks of the CLIs' APIs report
OUTPUT_TOKENS = 7

#: the scenarios the mocks of the CLIs' own APIs (Anthropic, OpenAI Responses, Mistral) share;
#: what each error sends, and which tools ``tool_attack`` goes for, is the mock's own
CLI_API_SCENARIOS: frozenset[str] = frozenset({
    "success",  # the deltas, `delay` seconds apart
    "rate_limit", "auth", "server_error", "overloaded",  # the vendor's 429, 401, 500, 5xx
    "error",  # any status: `status`, `error_type`, `message`
    "slow",  # " chunk0", " chunk1", ... one every `interval` s; `count` chunks or forever
    "stall",  # one delta, then silence with the connection open
    "hang",  # read the request, never send a status line
    "drop",  # read the request, close the connection without a response
    # a hostile model, for the security tests: it calls an offered tool that runs a shell
    # command or reads a file; a request carrying the tool's result gets text echoing it (so
    # a leak reaches the client); offered no such tool, it answers plain text
    "tool_attack",
})


class ScenarioBase:
    """The base of a mock's ``Scenario``, a frozen dataclass whose first field is ``name``."""

    name: str
    deltas: tuple[str, ...]
    delay: float
    interval: float
    count: int | None
    times: int | None

    @classmethod
    def defaults(cls, name: str) -> dict[str, Any]:
        """The options scenario ``name`` takes unless given (e.g. an error's message)."""
        return {}

    @classmethod
    def build(cls, name: str, **options: Any) -> Self:
        """Scenario ``name`` with ``options``; ValueError for an unknown option."""
        known = {f.name for f in dataclasses.fields(cls)} - {"name"}  # type: ignore[arg-type]
        unknown = set(options) - known
        if unknown:
            raise ValueError(
                f"unknown scenario option(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(name=name, **{**cls.defaults(name), **options})  # type: ignore[call-arg]

    def as_json(self) -> dict[str, Any]:
        """The scenario as JSON values (tuples as lists): what ``/_mock/scenario`` shows."""
        data = dataclasses.asdict(self)  # type: ignore[call-overload]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    def check_common(self, names: frozenset[str], *, retry_after: bool = False) -> None:
        """Check the options every mock has (ValueError): ``name`` one of ``names``,
        ``deltas`` a list of strings (kept as a tuple), ``delay`` and ``interval`` finite
        numbers >= 0, ``retry_after`` (if asked) a number >= 0 or null, ``count`` an integer
        >= 0 or null, ``times`` an integer >= 1 or null and ``status`` (if it has one) an
        HTTP status code."""
        if self.name not in names:
            raise ValueError(f"unknown scenario {self.name!r}; known: {sorted(names)}")
        if isinstance(self.deltas, str) or not all(isinstance(d, str) for d in self.deltas):
            raise ValueError("deltas must be a list of strings")
        object.__setattr__(self, "deltas", tuple(self.deltas))
        for field in ("delay", "interval"):
            value = getattr(self, field)
            if not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
                raise ValueError(f"{field} must be a finite number >= 0")
        after = getattr(self, "retry_after", None)
        if retry_after and after is not None and (not isinstance(after, int | float)
                                                  or after < 0):
            raise ValueError("retry_after must be a number >= 0 or null")
        if self.count is not None and (not isinstance(self.count, int) or self.count < 0):
            raise ValueError("count must be an integer >= 0 or null")
        if self.times is not None and (not isinstance(self.times, int) or self.times < 1):
            raise ValueError("times must be an integer >= 1 or null")
        status = getattr(self, "status", 400)
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError("status must be an HTTP status code")

    def check_strings(self, *fields: str) -> None:
        """ValueError unless each of ``fields`` is a string."""
        for field in fields:
            if not isinstance(getattr(self, field), str):
                raise ValueError(f"{field} must be a string")

    def check_headers(self, field: str, own: frozenset[str]) -> None:
        """Keep ``field``, extra response headers, as :func:`checked_headers` returns them
        (``own``: the headers the mock sends itself besides the framing)."""
        object.__setattr__(self, field, checked_headers(getattr(self, field), option=field,
                                                        own=own))


@dataclasses.dataclass(frozen=True)
class CliApiScenario(ScenarioBase):
    """The options the mocks of the CLIs' own APIs share (:data:`CLI_API_SCENARIOS`); a mock's
    ``Scenario`` adds its own. Options a scenario does not use are ignored."""

    name: str = "success"
    deltas: tuple[str, ...] = DEFAULT_DELTAS  # success/stall: the text deltas
    delay: float = 0.05  # success/stall: seconds before each delta
    retry_after: float | None = None  # error scenarios: `retry-after` header (seconds)
    interval: float = 2.0  # slow: seconds before each chunk
    count: int | None = None  # slow: number of chunks, None = forever
    status: int = 400  # error: HTTP status
    error_type: str = "invalid_request_error"  # error: the vendor's error type
    message: str = "mock error"  # error: message (also overrides the built-in errors' text)
    times: int | None = None  # serve this scenario to the next N requests, then "success"

    async def stream_text(self, delta: Callable[[str], Awaitable[None]],
                          deltas: Sequence[str] | None = None) -> None:
        """Send the answer's text with ``delta`` as the scenario paces it: ``stall``, its first
        delta after ``delay``, then silence forever; ``slow``, `` chunk<i>`` every
        ``interval`` (``count`` of them, or forever); else each of ``deltas`` (default: the
        scenario's) after ``delay``."""
        if self.name == "stall":
            await trio.sleep(self.delay)
            await delta(self.deltas[0] if self.deltas else "Hello")
            await trio.sleep_forever()
        elif self.name == "slow":
            for i in itertools.count() if self.count is None else range(self.count):
                await trio.sleep(self.interval)
                await delta(f" chunk{i}")
        else:
            for text in self.deltas if deltas is None else deltas:
                await trio.sleep(self.delay)
                await delta(text)
