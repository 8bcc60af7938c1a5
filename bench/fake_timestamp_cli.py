#!/usr/bin/env -S python3 -S
"""A minimal fake ``claude -p --output-format stream-json`` for ``bench/spawn_overhead.py``.

Stdlib only, and only ``time`` and ``sys`` at that: ``-S`` (no ``site``) and no ``json``
(which imports ``re``: ~10 ms) keep the fake's own start-up and work short and steady. The
benchmark measures the same interpreter start-up with a bare ``subprocess.Popen`` baseline.

Like the real CLI it reads stdin to EOF before printing anything, then prints, one JSON object
a line and flushing after each, what the anthropic parser needs::

    system/init → stream_event message_start (model = --model) → ONE text_delta → result

The text_delta's text is itself JSON, ``{"exec_ns": ..., "first_line_ns": ...}``:
``time.time_ns()`` as soon as the script runs, and right before the content line is written.
Exit status 0.
"""

import time

EXEC_NS = time.time_ns()  # first statement: "the CLI has been exec'd and is running"

import sys  # noqa: E402  (a built-in module, already loaded: costs nothing)


def _quote(text: str) -> str:
    """``text`` as a JSON string literal (what ``json.dumps`` would give, without json)."""
    out = []
    for ch in text:
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    argv = sys.argv[1:]
    model = argv[argv.index("--model") + 1] if "--model" in argv[:-1] else "claude-bench"
    m = _quote(model)
    sys.stdin.buffer.read()
    _emit('{"type":"system","subtype":"init","session_id":"bench","model":' + m
          + ',"tools":[]}')
    _emit('{"type":"stream_event","session_id":"bench","event":{"type":"message_start",'
          '"message":{"id":"msg_bench","model":' + m + ',"role":"assistant"}}}')
    first_line_ns = time.time_ns()
    text = _quote('{"exec_ns": ' + str(EXEC_NS) + ', "first_line_ns": ' + str(first_line_ns)
                  + "}")
    _emit('{"type":"stream_event","session_id":"bench","event":{"type":"content_block_delta",'
          '"index":0,"delta":{"type":"text_delta","text":' + text + "}}}")
    _emit('{"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn",'
          '"session_id":"bench","result":' + text
          + ',"usage":{"input_tokens":1,"output_tokens":1}}')

if __name__ == "__main__":
    main()
