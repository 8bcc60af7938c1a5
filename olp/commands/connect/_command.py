"""``olp connect TOOL [--write] [--key KEY] [--model MODEL]``: the command, its parser and
what it prints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from olp.config import Settings

from .._args import Commands, user_home
from ._target import PLACEHOLDER, ConnectError, Rendered, Target
from ._tools import TOOLS, render
from ._write import WriteResult, write


def add_connect(commands: Commands) -> None:
    connect = commands.add_parser("connect", help="print (or --write) a config pointing a "
                                                  "coding tool at OLP")
    connect.add_argument("tool", metavar="TOOL",
                         help="aider, claude-code, cline, codex, continue or zed")
    connect.add_argument("--key", help="the OLP key the tool should use (else a placeholder)")
    connect.add_argument("--model", help="the model (or chain) to ask for (default: the "
                                         "`default` chain when configured, else sonnet)")
    connect.add_argument("--write", action="store_true",
                         help="write it into the tool's config (merged; a .bak is kept)")
    connect.set_defaults(handler=_command)


def _command(settings: Settings, args: argparse.Namespace) -> int:
    host = "127.0.0.1" if settings.bind in ("0.0.0.0", "::", "") else settings.bind
    host = f"[{host}]" if ":" in host else host
    model = args.model or ("default" if "default" in settings.config.routing.chains
                           else "sonnet")
    return run(args.tool, base_url=f"http://{host}:{settings.port}", key=args.key,
               model=model, write_files=args.write, home=user_home(), out=sys.stdout)


def run(tool: str, *, base_url: str, key: str | None, model: str, write_files: bool,
        home: Path, out: TextIO) -> int:
    """``olp connect``: 0 done, 1 refused (the reason on stderr), 2 unknown tool."""
    if tool not in TOOLS:
        return _fail(f"unknown tool {tool!r}; choose one of: {', '.join(TOOLS)}", 2)
    if not _is_http_url(base_url):
        return _fail(f"{base_url!r} is not an http:// or https:// URL with a host")
    target = Target(base_url, key or PLACEHOLDER, model)
    if not write_files:
        _print_rendered(tool, render(tool, target), out)
        return 0
    if tool != "cline" and key is None:
        return _fail("give --key KEY (an OLP key, e.g. from `olp keys create NAME`) to write "
                     "a configuration; without --write the placeholder is printed instead")
    try:
        result = write(tool, target, home)
    except (ConnectError, OSError) as exc:
        return _fail(str(exc))
    _print_result(result, out)
    return 0


def _fail(message: str, code: int = 1) -> int:
    print(f"olp connect: {message}", file=sys.stderr)
    return code


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _home_path(path: Path) -> str:
    return f"~/{path.as_posix()}"


def _print_rendered(tool: str, rendered: Rendered, out: TextIO) -> None:
    if rendered.path is not None:
        print(f"# {_home_path(rendered.path)} (`olp connect {tool} --write --key KEY` writes "
              "it)", file=out)
    print(rendered.text, end="", file=out)
    for note in rendered.notes:
        print(f"# {note}", file=out)


def _print_result(result: WriteResult, out: TextIO) -> None:
    if not result.changed:
        print(f"{result.path} already points at OLP; nothing changed", file=out)
    elif result.backup is not None:
        print(f"updated {result.path} (the old file is {result.backup})", file=out)
    else:
        print(f"wrote {result.path}", file=out)
    for note in result.notes:
        print(f"- {note}", file=out)
