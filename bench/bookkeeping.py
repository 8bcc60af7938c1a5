"""What one request's bookkeeping costs in CPU: the audit row and ledger, the key's limits,
the metrics and the log line, each alone and together, in-process.

    python -m bench.bookkeeping [--requests N]

Runs OLP's own code for what every model request keeps (issue #31 keeps all of it as it is):
a :class:`olp.http._trace.Trace` served by one hop with token usage, ended with a real
:class:`~olp.accounting.RequestLimiter` reservation, a real :class:`~olp.accounting.Recorder`
writing batches to a real SQLite database (every 100 rows, as its 0.25 s interval does at
about 400 requests/s; its worker thread's CPU counts too), the app's
:class:`olp.http._metrics.Metrics`, and the per-request log line through OLP's JSON formatter to a
file. Prints the CPU time (``time.process_time``: all threads) per request of each part and of
all together. ``bench.hot_path`` runs it after its cells, on the servers' CPU, to set it
against the floor's budget.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import trio

from olp.accounting import Recorder, RequestLimiter
from olp.http._metrics import Metrics  # the app's own classes, not exported
from olp.http._trace import Trace
from olp.ir import Usage
from olp.runtime.logs import JsonLinesFormatter
from olp.store import Database, Limits

PARTS = ("audit row and ledger", "limits", "metrics", "log line")
FLUSH_EVERY = 100
LIMITS = Limits(per_minute=1_000_000, per_day=10_000_000, tokens_per_day=10**12)


async def _measure(parts: Sequence[str], n: int, root: Path, out: TextIO) -> float:
    """CPU seconds per request with ``parts`` on (the trace itself always)."""
    db = await Database.open_async(root / f"olp-{len(parts)}-{time.monotonic_ns()}.db")
    recorder = Recorder(db) if "audit row and ledger" in parts else None
    limiter = RequestLimiter(monotonic=trio.current_time) if "limits" in parts else None
    metrics = Metrics(actors=dict, health=dict) if "metrics" in parts else None
    log = logging.getLogger(f"olp.bench.bookkeeping.{len(parts)}")
    log.propagate = False
    log.setLevel(logging.INFO)
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLinesFormatter())
    log.addHandler(handler)
    usage = Usage(prompt_tokens=21, completion_tokens=7)
    try:
        t0 = time.process_time()
        for i in range(n):
            trace = Trace("POST /v1/chat/completions", key="1", key_name="owner",
                          model_request=True, requested_model="direct", dialect="openai")
            if limiter is not None:
                trace.reservation = limiter.reserve("1", LIMITS)
            trace.served(provider="up", account="default", model="gpt-4o-mini",
                         entry="direct", index=0, cache="bypass", records=(),
                         usage=usage, seconds=0.002)
            trace.end(200, "ok", limiter=limiter, recorder=recorder, metrics=metrics)
            if "log line" in parts:
                log.info("chat completion", extra={
                    "event": "chat", "key": "owner", "requested_model": "direct",
                    "provider": "up", "model": "gpt-4o-mini", "stream": False,
                    "status": 200, "outcome": "ok", "ms": 3})
            if recorder is not None and i % FLUSH_EVERY == FLUSH_EVERY - 1:
                await recorder.flush()
        if recorder is not None:
            await recorder.flush()
        return (time.process_time() - t0) / n
    finally:
        log.removeHandler(handler)
        db.close()


def measure(n: int = 20_000) -> dict[str, float]:
    """CPU ms per request: ``none`` (the trace alone), each part, and ``all``; each the best
    of three runs (this machine's speed drifts)."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="olp-bookkeeping-") as tmp, \
            open(Path(tmp) / "log.jsonl", "a", encoding="utf-8") as log:
        runs: list[tuple[str, tuple[str, ...]]] = [
            ("none", ()), *((p, (p,)) for p in PARTS), ("all", PARTS)]
        for name, parts in runs:
            out[name] = 1000 * min(trio.run(_measure, parts, n, Path(tmp), log) for _ in range(3))
    return out


def summary(figures: dict[str, float]) -> str:
    """``part a.aa ms, …``: each part above the bare trace, and all of them together."""
    base = figures["none"]
    each = ", ".join(f"{p} {figures[p] - base:.3f}" for p in PARTS)
    return f"{each}; all together **{figures['all'] - base:.3f} ms**"


def main(argv: Sequence[str] | None = None, *, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bookkeeping", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000, metavar="N")
    args = parser.parse_args(argv)
    out(f"CPU per request, ms (best of 3 × {args.requests}): "
        + summary(measure(args.requests)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
