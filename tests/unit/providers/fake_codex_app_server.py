"""A scripted ``codex app-server`` for MockClock tests: a :class:`CliProcess` speaking the
JSON-RPC the real 0.171.0 speaks (``tests/fixtures/cli-reference/codex/app_server``), with
virtual-time pacing. Each ``turn/start`` plays the next :class:`Script`."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import trio

from olp.actors import SpawnSpec


@dataclass(frozen=True)
class Script:
    """One turn: ``deltas`` each after ``delay`` virtual seconds, then usage, the rate
    limits and ``turn/completed`` (``status``; ``error`` for a failed turn). ``stall``: after
    the deltas, wait for ``turn/interrupt`` forever. ``ask``: a server→client request sent
    before the first delta."""

    deltas: tuple[str, ...] = ("Hello", " from", " codex.")
    delay: float = 0.25
    status: str = "completed"
    error: dict[str, Any] | None = None
    stall: bool = False
    ask: str | None = None
    reasoning: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()  # get_weather calls (their cities), after the deltas
    #: after its calls are answered, the turn goes on with these deltas (else it waits for
    #: ``turn/interrupt``)
    then: tuple[str, ...] = ()


@dataclass(eq=False)
class FakeAppServer:
    scripts: list[Script] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)  # replies to its requests
    returncode: int | None = None
    init_delay: float = 0.7

    def __post_init__(self) -> None:
        self._out_send, self._out_recv = trio.open_memory_channel[bytes | None](math.inf)
        self._exited = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._ids = itertools.count(1)
        self._interrupted: dict[str, trio.Event] = {}
        self._answered = trio.Event()
        self.inputs: dict[str, list[str]] = {}  # each thread's turn texts, in order
        self.threads: set[str] = set()  # subscribed threads

    async def run(self, *, task_status: trio.TaskStatus[FakeAppServer] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(self)
            await self._exited.wait()
            nursery.cancel_scope.cancel()

    def methods(self) -> list[str]:
        return [m["method"] for m in self.received if "method" in m]

    # CliProcess
    async def receive_line(self) -> bytes | None:
        return await self._out_recv.receive()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def stderr_tail(self) -> bytes:
        return b""

    def kill(self) -> None:
        self.exit(-9)

    async def send_input(self, data: bytes, *, close: bool = True) -> None:
        await trio.lowlevel.checkpoint()
        if self.returncode is not None:
            raise trio.BrokenResourceError("the fake no longer reads stdin")
        assert data.endswith(b"\n") and data.count(b"\n") == 1 and not close
        message = json.loads(data)
        self.received.append(message)
        assert self._nursery is not None
        try:
            self._nursery.start_soon(self._handle, message)
        except RuntimeError as exc:
            raise trio.BrokenResourceError("the fake has ended") from exc

    def running(self) -> bool:
        return self.returncode is None

    def rss_bytes(self) -> int:
        return 123 << 20

    # the fake's side
    def exit(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._out_send.send_nowait(None)
            self._exited.set()

    def emit(self, message: dict[str, Any]) -> None:
        if self.returncode is None:
            self._out_send.send_nowait(json.dumps(message).encode())

    async def _handle(self, message: dict[str, Any]) -> None:
        method, params, mid = message.get("method"), message.get("params", {}), message.get("id")
        if method is None:
            self.answers.append(message)
            self._answered.set()
        elif method == "initialize":
            await trio.sleep(self.init_delay)
            self.emit({"id": mid, "result": {"userAgent": "olp/0.171.0 (fake)"}})
        elif method == "thread/start":
            thread = f"thread-{next(self._ids)}"
            self.threads.add(thread)
            self._interrupted[thread] = trio.Event()
            self.emit({"id": mid, "result": {"thread": {"id": thread, "ephemeral": True}}})
        elif method == "turn/start":
            thread = params["threadId"]
            self.inputs.setdefault(thread, []).append(params["input"][0]["text"])
            turn = f"turn-{next(self._ids)}"
            self.emit({"id": mid, "result": {"turn": {"id": turn, "status": "inProgress"}}})
            await self._play(thread, turn, self.scripts.pop(0) if self.scripts else Script())
        elif method == "turn/interrupt":
            self._interrupted[params["threadId"]].set()
            self.emit({"id": mid, "result": {}})
        elif method == "thread/unsubscribe":
            self.threads.discard(params["threadId"])
            self.emit({"id": mid, "result": {"status": "unsubscribed"}})
        elif mid is not None:
            self.emit({"id": mid, "error": {"code": -32601, "message": "unknown"}})

    async def _play(self, thread: str, turn: str, script: Script) -> None:
        base = {"threadId": thread, "turnId": turn}
        if script.ask is not None:
            self.emit({"id": 900, "method": script.ask, "params": base})
        for i, text in enumerate(script.reasoning):
            await trio.sleep(script.delay)
            self.emit({"method": "item/reasoning/summaryTextDelta",
                       "params": {**base, "itemId": "rs_1", "summaryIndex": i, "delta": text}})
        interrupted = self._interrupted[thread]
        for text in script.deltas:
            with trio.move_on_after(script.delay):
                await interrupted.wait()
            if interrupted.is_set():
                break
            self.emit({"method": "item/agentMessage/delta",
                       "params": {**base, "itemId": "msg_1", "delta": text}})
        for i, city in enumerate(script.calls):
            await trio.sleep(script.delay)
            arguments = json.dumps({"city": city})
            self.emit({"method": "rawResponseItem/completed", "params": {**base, "item": {
                "type": "function_call", "name": "get_weather", "arguments": arguments,
                "call_id": f"call_{i}"}}})
            self.emit({"id": 800 + i, "method": "item/tool/call", "params": {
                **base, "callId": f"call_{i}", "tool": "get_weather",
                "arguments": {"city": city}}})
        if script.calls:
            self.emit({"method": "rawResponse/completed", "params": {**base, "usage": {
                "inputTokens": 30, "cachedInputTokens": 0, "outputTokens": 9,
                "reasoningOutputTokens": 0, "totalTokens": 39}}})
        if script.calls and script.then:
            while len([a for a in self.answers if 800 <= a.get("id", 0) < 900]) \
                    < len(script.calls) and not interrupted.is_set():
                self._answered = trio.Event()
                with trio.move_on_after(1):
                    await self._answered.wait()
            if not interrupted.is_set():
                for text in script.then:
                    await trio.sleep(script.delay)
                    self.emit({"method": "item/agentMessage/delta",
                               "params": {**base, "itemId": "msg_2", "delta": text}})
                self.emit({"method": "turn/completed", "params": {"threadId": thread, "turn": {
                    "id": turn, "status": "completed", "items": [], "error": None}}})
                return
        if script.stall or script.calls or interrupted.is_set():
            await interrupted.wait()
            self.emit({"method": "turn/completed", "params": {"threadId": thread, "turn": {
                "id": turn, "status": "interrupted", "items": [], "error": None}}})
            return
        last = {"inputTokens": 25, "cachedInputTokens": 5, "cacheWriteInputTokens": 0,
                "outputTokens": 7, "reasoningOutputTokens": 2, "totalTokens": 32}
        self.emit({"method": "thread/tokenUsage/updated",
                   "params": {**base, "tokenUsage": {"total": last, "last": last}}})
        self.emit({"method": "account/rateLimits/updated", "params": {"rateLimits": {
            "primary": {"usedPercent": 42, "windowDurationMins": 300, "resetsAt": 1000},
            "secondary": {"usedPercent": 13, "windowDurationMins": 10080, "resetsAt": 2000}}}})
        self.emit({"method": "turn/completed", "params": {"threadId": thread, "turn": {
            "id": turn, "status": script.status, "items": [], "error": script.error}}})


class AppSpawner:
    """Every spawn is a fresh :class:`FakeAppServer` playing ``scripts`` (shared, in order)."""

    def __init__(self, scripts: list[Script] | None = None, *, fail: int = 0) -> None:
        self.scripts = scripts if scripts is not None else []
        self.fakes: list[FakeAppServer] = []
        self.specs: list[SpawnSpec] = []
        self.fail = fail  # the first N spawns exit before answering initialize

    @contextlib.asynccontextmanager
    async def open(self, spec: SpawnSpec) -> AsyncIterator[FakeAppServer]:
        self.specs.append(spec)
        fake = FakeAppServer(scripts=self.scripts)
        self.fakes.append(fake)
        async with trio.open_nursery() as nursery:
            await nursery.start(fake.run)
            if self.fail:
                self.fail -= 1
                fake.exit(1)
            try:
                yield fake
            finally:
                fake.exit(-15)

    @property
    def alive(self) -> int:
        return sum(1 for f in self.fakes if f.returncode is None)
