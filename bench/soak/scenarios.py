"""What the soak sends: the mocks and CLI scenarios (one fault each), the chains over them
(:class:`Kind`), and the seeded plan of requests with their client behaviours."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from bench._common import REPO

TIMEOUTS = {"first_output_s": 2, "idle_s": 2, "total_s": 5}
FAKES = REPO / "tests" / "support" / "fakes"
# CLI provider -> (fake, its FAKE_<PREFIX>_* knobs, model, API-key variable)
CLIS = {"anthropic": (FAKES / "fake_claude.py", "CLAUDE", "claude-sonnet-4-6",
                      "ANTHROPIC_API_KEY"),
        "openai": (FAKES / "fake_codex.py", "CODEX", "gpt-5.5", "OPENAI_API_KEY"),
        "mistral": (FAKES / "fake_vibe.py", "VIBE", "devstral", "MISTRAL_API_KEY")}
# mock name -> (scenario, options, can a one-hop chain to it complete?)
MOCKS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "ok": ("success", {}, True),
    "slow_first": ("slow_first", {"first_delay": 0.5, "interval": 0.1}, True),
    "malformed": ("success", {"malformed": True}, True),
    "reset": ("reset", {}, False),
    "drop": ("drop", {}, False),
    "hang": ("hang", {}, False),
    "unavailable": ("unavailable", {}, False),
    "server_error": ("server_error", {}, False),
    "rate_limit": ("rate_limit", {"retry_after": 1}, False),
    "stall": ("stall", {"cut_after": 2}, False),
    "cut": ("cut", {"cut_after": 2}, False),
    "stream_error": ("stream_error", {"cut_after": 2}, False),
    "early_eof": ("success", {"finish": False, "done": False}, False),
}
PRE_CONTENT_FAULTS = ("reset", "drop", "hang", "unavailable", "server_error", "rate_limit")
# CLI provider -> {scenario: can it complete?}; crash_before, exit_nonzero and stall are the
# dispatcher's (a SIGSEGV before any output; exit 2 with a message; the fake's hold file that
# never appears, i.e. silence after the first chunk), the others the fakes' own
CLI_SCENARIOS: dict[str, dict[str, bool]] = {
    "anthropic": {"success": True, "garbage": True, "crash_before": False,
                  "exit_nonzero": False, "server_error": False, "hang": False, "stall": False,
                  "crash_mid_stream": False, "slow": False},
    "openai": {"success": True, "garbage": True, "crash_before": False, "exit_nonzero": False,
               "server_error": False, "hang": False, "stall": False,
               "crash_mid_answer": False, "slow": False},
    "mistral": {"success": True, "crash_before": False, "exit_nonzero": False,
                "server_error": False, "hang": False, "crash_mid_answer": False},
}
FALLBACK_CLI_FAULTS = ("crash_before", "exit_nonzero", "hang")
DISPATCHER = r"""#!/usr/bin/env bash
# Written by bench/soak: run $SOAK_FAKE with the scenario named in the prompt.
prompt=$(cat; printf x); prompt=${prompt%x}
scenario=success
[[ $prompt =~ soak-scenario=([a-z_]+) ]] && scenario=${BASH_REMATCH[1]}
case $scenario in
  crash_before) ulimit -c 0; kill -SEGV $$ ;;
  exit_nonzero) echo "soak: the CLI failed before any output" >&2; exit 2 ;;
  stall) export "FAKE_${SOAK_PREFIX}_HOLD_FILE=/nonexistent/soak-hold"; scenario=success ;;
esac
export "FAKE_${SOAK_PREFIX}_SCENARIO=$scenario"
exec "$SOAK_FAKE" "$@" <<<"$prompt"
"""


def mock_text(name: str) -> str:
    return f"soak {name} answer."


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # "http ok", "anthropic stall", "fallback hang → ok", ...
    model: str  # the chain
    scenario: str = ""  # the CLI scenario named in the prompt
    must_fail: bool = False  # no complete answer is possible: one would be truncated

    def prompt(self, variant: int) -> str:
        marker = f" soak-scenario={self.scenario}" if self.scenario else ""
        return f"Say hello. [soak kind={self.name}{marker} variant={variant}]"


def kinds() -> list[Kind]:
    """Every chain × fault: one-hop chains to each mock and each CLI scenario, and two-hop
    chains whose first hop fails before any content and whose second is the ``ok`` mock."""
    out = [Kind(f"http {m}", f"h-{m}", must_fail=not ok) for m, (_, _, ok) in MOCKS.items()]
    out += [Kind(f"fallback {m} → ok", f"f-{m}") for m in PRE_CONTENT_FAULTS]
    for provider, scenarios in CLI_SCENARIOS.items():
        out += [Kind(f"{provider} {s}", f"c-{provider}", s, not ok) for s, ok in scenarios.items()]
    out += [Kind(f"fallback anthropic {s} → ok", "f-anthropic", s) for s in FALLBACK_CLI_FAULTS]
    return out


@dataclass(frozen=True, slots=True)
class Planned:
    n: int
    kind: Kind
    prompt: str
    stream: bool
    behaviour: str  # normal | slow | disconnect
    cut_after_s: float | None = None  # disconnect after this long
    cut_after_events: int | None = None  # disconnect after this many SSE events
    read_pause_s: float = 0.0  # slow: pause after each read of at most 1 KiB


def plan(requests: int, seed: int) -> list[Planned]:
    """The requests, from ``random.Random(seed)``: the same seed gives the same run. Half
    the prompts come from a small pool per kind (so cache hits and shared flights happen),
    half are unique."""
    rng, all_kinds, out = random.Random(seed), kinds(), []
    for n in range(requests):
        kind = rng.choice(all_kinds)
        variant = rng.randrange(4) if rng.random() < 0.5 else 1000 + n
        stream, roll = rng.random() < 0.8, rng.random()
        if roll < 0.7:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "normal"))
        elif roll < 0.85:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "slow",
                               read_pause_s=rng.uniform(0.005, 0.05)))
        elif stream and rng.random() < 0.5:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "disconnect",
                               cut_after_events=rng.randrange(0, 6)))
        else:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "disconnect",
                               cut_after_s=rng.uniform(0.0, 2.5)))
    return out
