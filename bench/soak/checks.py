"""What must hold after the run: no BAD answer, no process, slot, flight or cache entry from a
failed answer left, and bounded RSS growth; every cache entry traced back to its prompt."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .drive import Run, slots_held
from .scenarios import CLI_SCENARIOS, MOCKS, mock_text


@dataclass(frozen=True, slots=True)
class Check:
    what: str
    measured: str
    limit: str
    ok: bool


def check_run(run: Run, health: dict[str, Any], stats: dict[str, Any], children: set[int],
              marked: set[int], orphans: set[int], rss_end_kib: int, entries: int,
              entry_problems: list[str], max_growth_pct: float) -> list[Check]:
    bad = sum(o.outcome == "BAD" for o in run.outcomes)
    completed = {o.request.prompt for o in run.outcomes if o.outcome == "complete"}
    can_complete = {o.request.prompt for o in run.outcomes if not o.request.kind.must_fail}
    growth = (rss_end_kib - run.rss_base_kib) * 100 / run.rss_base_kib if run.rss_base_kib \
        else float("nan")
    return [
        Check("answers neither complete nor a clear error (BAD)", str(bad), "0", bad == 0),
        Check("child processes of the proxy after the run", str(len(children)), "0",
              not children),
        Check("fake-CLI processes of this run left (while running / after shutdown)",
              f"{len(marked)} / {len(orphans)}", "0 / 0", not marked and not orphans),
        Check("limiter slots held (`/health`, every provider's `in_flight`)",
              str(slots_held(health)), "0", slots_held(health) == 0),
        Check("cache flights in progress (`/cache/stats` `in_flight`)",
              str(stats.get("in_flight")), "0", stats.get("in_flight") == 0),
        Check("cache entries from failed answers (every entry traced to its prompt)",
              str(len(entry_problems)), "0", not entry_problems),
        Check("cache entries ≤ distinct prompts to routes that can complete "
              f"({len(completed)} of them got a complete answer)",
              f"{entries} ≤ {len(can_complete)}", "", entries <= len(can_complete)),
        Check(f"proxy RSS growth from request {run.rss_at:,} to the end",
              f"{run.rss_base_kib / 1024:.1f} → {rss_end_kib / 1024:.1f} MiB "
              f"({growth:+.1f} %)", f"≤ {max_growth_pct:g} %",
              growth == growth and growth <= max_growth_pct),
    ]


def cache_entry_problems(db: Path) -> tuple[int, list[str]]:
    """Read every stored answer (after the proxy stopped); return how many and the problems:
    an entry that is not a complete answer, or that answers a prompt whose fault cannot end
    in one. The fakes run with ``FAKE_*_ECHO=1``, so a CLI answer is a JSON digest whose
    ``stdin_tail`` holds the prompt (a cut answer does not parse); a mock's answer names it."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT provider, events FROM cache_entries").fetchall()
    problems = []
    for provider, blob in rows:
        events = json.loads(blob)
        types = [e.get("type") for e in events]
        text = "".join(e.get("text", "") for e in events if e.get("type") == "text_delta")
        if "error" in types or not types or types[-1] != "stop":
            problems.append(f"{provider}: not a complete answer: {types}")
        elif provider in MOCKS:
            if not MOCKS[provider][2] or text != mock_text(provider):
                problems.append(f"{provider}: a cached answer from a failing mock: {text!r}")
        elif provider in CLI_SCENARIOS:
            try:
                tail_ = json.loads(text)["stdin_tail"]
            except (ValueError, KeyError, TypeError):
                problems.append(f"{provider}: a cut answer was cached: {text[:120]!r}")
                continue
            found = re.search(r"soak-scenario=([a-z_]+)", tail_)
            scenario = found.group(1) if found else "?"
            if not CLI_SCENARIOS[provider].get(scenario, False):
                problems.append(f"{provider}: cached an answer to scenario {scenario}")
        else:
            problems.append(f"{provider}: an entry from an unknown provider")
    return len(rows), problems
