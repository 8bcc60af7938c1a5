#!/usr/bin/env -S python3 -S
"""A minimal fake ``claude -p --output-format stream-json`` for ``bench/spawn_overhead.py``.

Stdlib only. ``-S`` (no ``site``) keeps the interpreter's start-up short and steady (``site``
alone can cost tens of ms when a ``.pth`` file imports something); the benchmark measures the
same start-up with a bare ``subprocess.Popen`` baseline, so it cancels out either way.

Like the real CLI it reads stdin to EOF before printing anything, then prints, one JSON object
a line and flushing after each, what the anthropic parser needs::

    system/init → stream_event message_start (model = --model) → ONE text_delta → result

The text_delta's text is itself JSON, ``{"exec_ns": ..., "first_line_ns": ...}``:
``time.time_ns()`` as soon as the script runs, and right before the content line is written.
Exit status 0.
"""

import time

EXEC_NS = time.time_ns()  # first statement: "the CLI has been exec'd and is running"

import json  # noqa: E402
import sys  # noqa: E402


def _emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main() -> None:
    argv = sys.argv[1:]
    model = argv[argv.index("--model") + 1] if "--model" in argv[:-1] else "claude-bench"
    sys.stdin.buffer.read()
    _emit({"type": "system", "subtype": "init", "session_id": "bench", "model": model,
           "tools": []})
    _emit({"type": "stream_event", "session_id": "bench",
           "event": {"type": "message_start",
                     "message": {"id": "msg_bench", "model": model, "role": "assistant"}}})
    first_line_ns = time.time_ns()
    text = json.dumps({"exec_ns": EXEC_NS, "first_line_ns": first_line_ns})
    _emit({"type": "stream_event", "session_id": "bench",
           "event": {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": text}}})
    _emit({"type": "result", "subtype": "success", "is_error": False, "stop_reason": "end_turn",
           "session_id": "bench", "result": text,
           "usage": {"input_tokens": 1, "output_tokens": 1}})


if __name__ == "__main__":
    main()
