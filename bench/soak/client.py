"""One request with its client behaviour, and the classification of its answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from .scenarios import Planned

PATH = "/v1/chat/completions"
GUARD_S = 60.0  # a request without an end after this long is BAD (a hang)


@dataclass(slots=True)
class Outcome:
    request: Planned
    outcome: str  # complete | error | disconnected | BAD
    detail: str = ""  # the error's status/code, or why it is BAD


def _error_of(obj: Any) -> dict[str, Any] | None:
    error = obj.get("error") if isinstance(obj, dict) else None
    return error if isinstance(error, dict) and "message" in error else None


def classify(req: Planned, status: int, body: bytes, cut: bool, problem: str,
             truncated: bool = False) -> Outcome:
    """Sort one answer into complete / error / disconnected / BAD (see the module doc).
    ``truncated``: the ``X-OLP-Truncated: true`` header, with which a JSON answer whose every
    hop failed mid-answer carries the partial text (``finish_reason: "length"``, README)."""
    outcome = _classify(req, status, body, cut, problem, truncated)
    if outcome.outcome == "complete" and req.kind.must_fail:
        return Outcome(req, "BAD", "a complete answer from a route that always fails")
    return outcome


def _classify(req: Planned, status: int, body: bytes, cut: bool, problem: str,
              truncated: bool) -> Outcome:
    def bad(why: str) -> Outcome:
        return Outcome(req, "BAD", why)

    def code(error: dict[str, Any]) -> str:
        return str(error.get("code") or error.get("type"))

    if status == 0:
        return Outcome(req, "disconnected") if cut else bad(problem or "no response")
    if status != 200:
        try:
            error = _error_of(json.loads(body))
        except ValueError:
            error = None
        if error is not None:
            return Outcome(req, "error", f"{status} {code(error)}")
        return Outcome(req, "disconnected") if cut else bad(
            f"HTTP {status} without an OpenAI error body: {body[:120]!r}")
    if not req.stream:
        try:
            choice = json.loads(body)["choices"][0]
            if truncated and choice["finish_reason"] == "length":
                return Outcome(req, "error", "200 X-OLP-Truncated")
            if choice["finish_reason"] and "message" in choice and not truncated:
                return Outcome(req, "complete")
        except (ValueError, LookupError, TypeError):
            pass
        return Outcome(req, "disconnected") if cut else bad(f"200 JSON, not a completion "
                                                            f"({problem}): {body[:120]!r}")
    events = body.replace(b"\r\n", b"\n").split(b"\n\n")
    if not body.endswith(b"\n\n"):
        events = events[:-1]  # a partial last event (the client or the server cut it)
    done = finished = False
    error = None
    for event in events:
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                continue
            try:
                obj = json.loads(data)
            except ValueError:
                return bad(f"an undecodable SSE event: {data[:120]!r}")
            error = error or _error_of(obj)
            finished = finished or any(c.get("finish_reason") for c in obj.get("choices") or ())
    if error is not None:
        return bad("[DONE] after an error event") if done else Outcome(
            req, "error", f"stream {code(error)}")
    if done and finished:
        return Outcome(req, "complete")
    if cut:
        return Outcome(req, "disconnected")
    return bad("a 200 stream ended without [DONE] and without an error event"
               + (f" ({problem})" if problem else ""))


async def send(client: httpx.AsyncClient, req: Planned) -> Outcome:
    """One request with its client behaviour; never raises (except Cancelled)."""
    body: dict[str, Any] = {"model": req.kind.model, "stream": req.stream,
                            "messages": [{"role": "user", "content": req.prompt}]}
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    status, received, cut, problem, truncated = 0, bytearray(), False, "", False
    with trio.move_on_after(GUARD_S) as guard:
        with trio.move_on_after(req.cut_after_s if req.cut_after_s is not None
                                else float("inf")) as timer:
            try:
                async with client.stream("POST", PATH, json=body) as response:
                    status = response.status_code
                    truncated = response.headers.get("x-olp-truncated") == "true"
                    async for chunk in response.aiter_raw(1024 if req.read_pause_s else None):
                        received += chunk
                        if req.read_pause_s:
                            await trio.sleep(req.read_pause_s)
                        if (req.cut_after_events is not None
                                and received.count(b"\n\n") >= req.cut_after_events):
                            cut = True
                            break
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"[:200]
        cut = cut or timer.cancelled_caught
    if guard.cancelled_caught:
        return Outcome(req, "BAD", f"no end of the answer after {GUARD_S:g} s")
    return classify(req, status, bytes(received), cut, problem, truncated)
