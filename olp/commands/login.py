"""``olp login PROVIDER [--account NAME] [--device-auth] [--token] [--dry-run]``: run a CLI's
own login, in the terminal, into one account's home (issue #30).

The home is the account's configured ``home``, else ``$OLP_HOME/accounts/<provider>/<account>``
(made 0700); the account ``default`` without a configured home is the owner's own login, left
where the CLI keeps it (no home variable set). The CLI runs with the user's environment less
the provider's login variables (:attr:`~olp.providers.kit.ProviderSpec.login_vars`) and with its
home variable naming the home, so it neither reads nor overwrites the owner's login. How each
CLI logs in, and where the login lands, was measured on the pinned binaries:
``tests/fixtures/cli-reference/LOGIN.md``; :data:`FLOWS` holds those facts. A CLI with no login
that lands in a home (qwen: a key in the environment; claude's ``setup-token``: a token it only
prints) gets the ``config.json`` snippet to write instead. ``config.json`` is never written.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

from olp.config import Settings
from olp.providers import kit
from olp.store import DEFAULT_ACCOUNT, valid_account_name

from ._args import Commands
from ._tables import printable


@dataclass(frozen=True, slots=True)
class Flow:
    """How one CLI logs in. ``args``: its login command after the binary (``None``: it has
    none that stores a login, :attr:`instead` says what to do); ``headless_args`` and
    ``headless_env``: the same without a browser on this machine (``--device-auth``);
    ``token_args``: a login that prints a token and stores nothing (``--token``);
    ``login_file``: where the login lands, relative to the home; ``guide``: what to choose in
    the CLI; ``token_var``: the variable the printed token goes in; ``instead``: the account
    ``env`` to write when there is no login to run (``own_var``: or, for your own login, this
    variable of the proxy's environment)."""

    args: tuple[str, ...] | None
    login_file: str | None = None
    headless_args: tuple[str, ...] | None = None
    headless_env: Mapping[str, str] = field(default_factory=dict)
    guide: str = ""
    token_args: tuple[str, ...] | None = None
    token_var: str | None = None
    instead: Mapping[str, str] = field(default_factory=dict)
    own_var: str = ""


#: Per provider, as measured on the pinned CLIs (``tests/fixtures/cli-reference/LOGIN.md``).
FLOWS: Final[Mapping[str, Flow]] = {
    "anthropic": Flow(
        ("auth", "login"), ".credentials.json", token_args=("setup-token",),
        token_var="CLAUDE_CODE_OAUTH_TOKEN",
        guide="sign in with your Claude subscription; without a browser, open the URL claude "
              "prints on any device and paste the code back"),
    "openai": Flow(
        ("login",), "auth.json", headless_args=("login", "--device-auth"),
        guide="sign in with ChatGPT (without a browser: open the link on any device and enter "
              "the one-time code)"),
    "gemini": Flow(
        (), ".gemini/oauth_creds.json", headless_env={"NO_BROWSER": "true"},
        guide="gemini has no login command: olp starts gemini itself. Answer its folder-trust "
              "question (any answer), choose \"Sign in with Google\" (without a browser: open "
              "the URL it prints and paste the code back), then type /quit once signed in"),
    "qwen": Flow(None, instead={
        "OPENAI_API_KEY": "<your Coding Plan or OpenAI-compatible key>",
        "OPENAI_BASE_URL": "https://coding-intl.dashscope.aliyuncs.com/v1"},
        own_var="BAILIAN_CODING_PLAN_API_KEY (an Alibaba Coding Plan key)"),
    "mistral": Flow(
        ("--setup",), ".env",
        guide="choose \"Use an API key\" and paste your Mistral key (or \"Launch browser\" "
              "where there is one)"),
}


def add_login(commands: Commands) -> None:
    login = commands.add_parser(
        "login", help="log a CLI into one account (its own login, run in this terminal)",
        description="Run a CLI's own login in the terminal, into one account's home "
                    "(providers.<name>.accounts.<account>). PROVIDER: " + ", ".join(
                        f"{s.name} ({s.command})" for s in _specs()) + ".")
    login.add_argument("provider", metavar="PROVIDER", type=_provider,
                       help="a built-in CLI provider, by its name or its command")
    login.add_argument("--account", default=DEFAULT_ACCOUNT, type=_account, metavar="NAME",
                       help="the account (default: `default`, your own login)")
    login.add_argument("--device-auth", action="store_true",
                       help="log in without a browser on this machine (device code or pasted "
                            "code); chosen by itself over SSH or with no display")
    login.add_argument("--token", action="store_true",
                       help="claude only: `claude setup-token`, a 1-year token it prints and "
                            "does not store (then put it in the account's env)")
    login.add_argument("--dry-run", action="store_true",
                       help="print the command, the home and the variables; run nothing")
    login.set_defaults(handler=_login)


def _specs() -> tuple[kit.ProviderSpec, ...]:
    return tuple(s for s in kit.builtin_specs() if s.kind == "cli" and s.name in FLOWS)


def _provider(text: str) -> kit.ProviderSpec:
    for spec in _specs():
        if text in (spec.name, spec.command):
            return spec
    known = ", ".join(f"{s.name} ({s.command})" for s in _specs())
    raise argparse.ArgumentTypeError(f"{text!r} is not a CLI provider: one of {known}")


def _account(text: str) -> str:
    if not valid_account_name(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an account name: 1-32 of a-z, 0-9, - and _, starting with a "
            "letter or digit")
    return text


def _login(settings: Settings, args: argparse.Namespace) -> int:
    return run(settings, args.provider, args.account, device_auth=args.device_auth,
               token=args.token, dry_run=args.dry_run)


@dataclass(frozen=True, slots=True)
class Plan:
    """What ``olp login`` runs: ``command`` (the binary, or its bare name when not found:
    ``found`` False), in ``env``; ``home`` (``None``: the owner's own login, where the CLI
    keeps it); ``sets``: what it adds to the user's environment; ``why``: why a variant was
    chosen without being asked for."""

    command: list[str]
    found: bool
    env: dict[str, str]
    home: Path | None
    sets: dict[str, str]
    token: bool
    why: str = ""


def plan(settings: Settings, spec: kit.ProviderSpec, account: str, environ: Mapping[str, str],
         *, device_auth: bool = False, token: bool = False,
         platform: str | None = None) -> Plan:
    """The login of ``spec``'s CLI into ``account`` (``FLOWS[spec.name].args`` not ``None``).
    Resolves the binary (briefly blocking)."""
    flow = FLOWS[spec.name]
    platform = platform or sys.platform
    provider = settings.provider(spec.name)
    configured = provider.account(account)
    home: Path | None
    if configured is not None and configured.home is not None:
        home = configured.home
    elif account == DEFAULT_ACCOUNT:
        home = None
    else:
        home = settings.account_home(spec.name, account)
    why = ""
    # On macOS claude keeps its login in the keychain under a name made from its config dir,
    # not in the home: an account other than yours needs the token.
    if not token and flow.token_args and platform == "darwin" and home is not None:
        token, why = True, (f"on macOS {spec.command} keeps its login in the keychain, not in "
                            f"the home: a token instead")
    headless = device_auth or _no_browser(environ, platform)
    if headless and not device_auth and (flow.headless_args or flow.headless_env) \
            and not token:
        why = "no browser here (SSH, or no display): the login without one (--device-auth)"
    args = flow.token_args if token and flow.token_args is not None else \
        flow.headless_args if headless and flow.headless_args is not None else flow.args
    sets = {spec.home_var: str(home)} if home is not None and spec.home_var else {}
    if headless:
        sets.update(flow.headless_env)
    env = spec.account_env(environ, home)
    env.update(sets)
    binary = kit.resolve_binary(spec, provider.binary, environ)
    command = [binary or spec.command or spec.name, *(args or ())]
    return Plan(command, binary is not None, env, home, sets, token, why)


def run(settings: Settings, spec: kit.ProviderSpec, account: str, *, device_auth: bool = False,
        token: bool = False, dry_run: bool = False, environ: Mapping[str, str] | None = None,
        out: TextIO | None = None, platform: str | None = None) -> int:
    """Log ``spec``'s CLI into ``account``: the CLI's exit status (0 when there was nothing
    to run, 1 when it is not installed or the home cannot be made, 2 for ``--token`` with a
    CLI that has no token login)."""
    env_in = dict(os.environ if environ is None else environ)
    out = out or sys.stdout
    flow = FLOWS[spec.name]
    declared = account == DEFAULT_ACCOUNT or account in _written_accounts(settings, spec.name)
    if token and flow.token_args is None:
        print(f"olp login: --token is for claude only ({spec.name} has no token login)",
              file=sys.stderr)
        return 2
    if flow.args is None:
        _print_instead(out, spec, account, flow.instead, flow.own_var, declared)
        return 0
    how = plan(settings, spec, account, env_in, device_auth=device_auth, token=token,
               platform=platform)
    if dry_run:
        _print_plan(out, spec, account, how, env_in, flow)
        _print_after(out, spec, account, how, flow, declared)
        return 0
    if not how.found:
        print(printable(f"olp login: {spec.command} not found ({spec.install_hint})"),
              file=sys.stderr)
        return 1
    if how.home is not None and not _make_home(how.home, out):
        return 1
    _say(out, f"Logging {spec.name}, account {account} in: {_shell(how.command)}",
         f"  home: {_home_text(spec, how.home)}",
         *([f"  {how.why}"] if how.why else []),
         f"  {_token_guide(flow) if how.token else flow.guide}")
    out.flush()
    status = _run_interactive(how.command, how.env)
    if status != 0:
        print(printable(f"olp login: {_shell(how.command)} exited {status}"), file=sys.stderr)
        return status
    if how.home is not None and flow.login_file and not how.token \
            and not (how.home / flow.login_file).exists():
        _say(out, f"olp login: no login in {how.home / flow.login_file} yet (was the sign-in "
                  f"finished?)")
    _print_after(out, spec, account, how, flow, declared)
    return 0


def _written_accounts(settings: Settings, provider: str) -> tuple[str, ...]:
    block = settings.config.providers.blocks.get(provider)
    return tuple(block.accounts) if block is not None else ()


def _no_browser(env: Mapping[str, str], platform: str) -> bool:
    """Whether this terminal likely has no browser to open: an SSH session, or a Unix other
    than macOS without a display."""
    if env.get("SSH_CONNECTION") or env.get("SSH_TTY"):
        return True
    if platform == "darwin" or platform.startswith("win"):
        return False
    return not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def _make_home(home: Path, out: TextIO) -> bool:
    """``home`` and the parents it lacks, made 0700; an existing one of ours is tightened to
    0700. False (said on stderr) when it cannot be."""
    missing: list[Path] = []
    path = home
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                continue
            os.chmod(directory, 0o700)  # whatever the umask
        info = home.stat()
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(f"{home} is not a directory")
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(home, 0o700)
        elif info.st_uid != os.getuid():
            _say(out, f"olp login: {home} is not yours; its mode is left as it is")
    except OSError as exc:
        print(printable(f"olp login: cannot make the account's home: {exc}"), file=sys.stderr)
        return False
    return True


def _run_interactive(command: list[str], env: Mapping[str, str]) -> int:
    """Run ``command`` on this terminal (stdin, stdout, stderr inherited) and wait. Ctrl-C is
    the CLI's to handle while it runs (the terminal sends it to both); SIGTERM and SIGHUP are
    passed on to it. A CLI killed by a signal gives 128 + its number."""
    try:
        process = subprocess.Popen(command, env=dict(env))  # noqa: S603 (the user's own CLI)
    except OSError as exc:
        print(printable(f"olp login: cannot run {command[0]}: {exc}"), file=sys.stderr)
        return 1

    def forward(signum: int, frame: object) -> None:
        process.send_signal(signum)

    # set after the spawn, so the CLI starts with the usual handlers
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, forward)
    try:
        code = process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def _say(out: TextIO, *lines: str) -> None:
    """Each line made safe for a terminal (a path or a name from the config may hold
    anything)."""
    for line in lines:
        print(printable(line), file=out)


def _shell(command: list[str]) -> str:
    return " ".join(command)


def _home_text(spec: kit.ProviderSpec, home: Path | None) -> str:
    if home is None:
        return (f"where {spec.command} keeps your own login (olp sets no "
                f"{spec.home_var or 'home variable'})")
    return f"{home} (mode 0700)"


def _token_guide(flow: Flow) -> str:
    return (f"claude prints a token and stores nothing: copy it, it goes in "
            f"{flow.token_var} (shown when done)")


def _snippet(provider: str, account: str, body: Mapping[str, object]) -> str:
    return json.dumps({"providers": {provider: {"accounts": {account: body}}}})


def _bind_hint(spec: kit.ProviderSpec, account: str) -> str:
    return (f"then `olp reload`, and bind a key to it: "
            f"`olp keys update NAME --accounts {spec.name}:{account}`")


def _print_declare(out: TextIO, spec: kit.ProviderSpec, account: str, declared: bool) -> None:
    if not declared:
        _say(out, "The account is not in config.json yet: add",
             f"  {_snippet(spec.name, account, {})}",
             '(with "serves": "*" if keys bound to nothing may use it too),',
             _bind_hint(spec, account))


def _print_token_snippet(out: TextIO, spec: kit.ProviderSpec, account: str, flow: Flow,
                         declared: bool) -> None:
    var = flow.token_var or ""
    if account == DEFAULT_ACCOUNT:
        _say(out, f"Nothing was stored: put the token claude printed in the environment "
                  f"`olp start` runs in, as {var}=<the token>")
        return
    _say(out, "Nothing was stored: put the token claude printed in config.json:",
         f"  {_snippet(spec.name, account, {'env': {var: '<the token>'}})}")
    if not declared:
        _say(out, _bind_hint(spec, account))


def _print_instead(out: TextIO, spec: kit.ProviderSpec, account: str,
                   env: Mapping[str, str], own_var: str, declared: bool) -> None:
    _say(out, f"{spec.command} has no login that olp can run into an account's home: its "
              f"login is a key in its environment. Nothing was run.")
    if account == DEFAULT_ACCOUNT:
        _say(out, "For your own login, in config.json:",
             "  " + json.dumps({"providers": {spec.name: {"env": dict(env)}}}))
        if own_var:
            _say(out, f"or {own_var} in the environment `olp start` runs in")
        return
    _say(out, "Put it in config.json:", f"  {_snippet(spec.name, account, {'env': dict(env)})}")
    if not declared:
        _say(out, _bind_hint(spec, account))


def _print_after(out: TextIO, spec: kit.ProviderSpec, account: str, how: Plan, flow: Flow,
                 declared: bool) -> None:
    if how.token:
        _print_token_snippet(out, spec, account, flow, declared)
    else:
        _print_declare(out, spec, account, declared)


def _print_plan(out: TextIO, spec: kit.ProviderSpec, account: str, how: Plan,
                env_in: Mapping[str, str], flow: Flow) -> None:
    _say(out, f"olp login {spec.name} --account {account} (dry run: nothing is run)",
         f"  command: {_shell(how.command)}" + ("" if how.found else
                                                f"  (not found: {spec.install_hint})"),
         f"  home: {_home_text(spec, how.home)}",
         f"  sets: {', '.join(f'{k}={v}' for k, v in how.sets.items()) or 'nothing'}")
    if how.home is not None:
        dropped = [v for v in spec.login_vars if v in env_in]
        _say(out, f"  unsets: {', '.join(dropped) or 'nothing (none is set)'}")
    if how.why:
        _say(out, f"  {how.why}")
    if how.token:
        _say(out, f"  {_token_guide(flow)}")
    elif how.home is not None and flow.login_file:
        _say(out, f"  the login lands in: {how.home / flow.login_file}")
