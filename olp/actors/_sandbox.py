"""Confining a CLI spawn with bubblewrap: it sees the system, its installation, its own dirs.

A CLI is an agent: whatever tools it keeps, or a later version adds, run with the proxy user's
rights. The sandbox makes that harmless. Each spawn runs in fresh mount, PID, IPC, UTS, user and
cgroup namespaces (the network is shared: the CLI must reach its vendor API) with every
capability dropped, and sees only:

* read-only: ``/usr`` and the merged-``/usr`` links, an allow-list of ``/etc`` entries (name
  resolution, TLS roots, users, time zone; not ``/etc/shadow``, not managed CLI settings such
  as ``/etc/claude-code`` or ``/etc/codex``), the CLI's installation and its interpreter's
  (:func:`install_roots`), and any ``extra_read_only`` path the owner configured;
* read-write: the spawn's job directory (its private home and working directory) and the
  credential files still linked into that home (a key file; never a login OLP keeps, whose
  spawns get only its access token: ``docs/adr/0031-how-logins-are-kept.md``);
* a private ``/tmp``, ``/proc`` of its own PID namespace, a minimal ``/dev``.

Not the owner's home, not ``OLP_HOME``, not other spawns' directories. The spawner's lifeline
watcher kills the sandbox's process group when the proxy dies, even by ``kill -9``, and the PID
namespace takes every process inside with it. Not ``--die-with-parent``: it fires when the
*thread* that forked bubblewrap exits, and Trio forks in worker threads that end after 10 s
idle, mid-answer. See ``docs/adr/0009-cli-spawns-are-models-not-agents.md`` and
``docs/adr/0011-spawns-die-with-the-proxy.md``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: Top-level system directories bound read-only (or mirrored as links on merged-/usr systems).
SYSTEM_DIRS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What a CLI needs from /etc: name resolution, TLS roots, users/groups, locale and time zone,
#: the dynamic linker cache, Debian's alternatives links. Anything else stays invisible.
ETC_ALLOW: Final = (
    "resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "services", "protocols",
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies",
    "passwd", "group", "localtime", "timezone", "locale.alias", "locale.conf",
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "os-release", "mime.types",
)
#: Where a spawn's job directory appears inside the sandbox, whatever its real path: its home
#: is ``/olp/job/home`` and its working directory ``/olp/job/work`` on every spawn. A CLI
#: names its paths early in what it sends upstream (claude's environment block, codex's
#: skills root); a random path there would make every spawn's prompt prefix unique, so no
#: turn could ever be served from the vendor's prompt cache (issue #25).
JOB_DIR_INSIDE: Final = Path("/olp/job")
BWRAP_HINT: Final = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: "
                     "dnf install bubblewrap), or opt out with providers.{name}.sandbox: false")


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The confinement of one provider's spawns (everything but the per-job paths).

    ``read_only`` are the CLI's installation roots and the owner's extra paths, computed once
    when the provider is built (:func:`install_roots`).
    """

    bwrap: str
    read_only: Sequence[Path] = ()

    def wrap(self, argv: Sequence[str], *, job_dir: Path, workdir: Path,
             writable: Iterable[Path] = (), inside: Path | None = None) -> list[str]:
        """``argv`` run inside the sandbox: ``job_dir`` (holding the spawn's home and working
        directory) bound read-write at ``inside`` (default: its own path; the runner passes
        :data:`JOB_DIR_INSIDE`), each existing ``writable`` file at its own path, and
        ``workdir`` (a path as the sandbox sees it) as the current directory. Pure: reads only
        the file system's shape (which system paths exist and which are links)."""
        args = [self.bwrap, "--unshare-all", "--share-net", "--cap-drop", "ALL"]
        for top in SYSTEM_DIRS:
            path = Path(top)
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), top]
            elif path.is_dir():
                args += ["--ro-bind", top, top]
        for name in ETC_ALLOW:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        # Binds below /tmp must come after the tmpfs that covers it.
        for root in self.read_only:
            args += ["--ro-bind-try", str(root), str(root)]
        for path in writable:
            args += ["--bind-try", str(path), str(path)]
        args += ["--bind", str(job_dir), str(inside or job_dir), "--chdir", str(workdir),
                 "--", *argv]
        return args


def find_bwrap(environ: Mapping[str, str]) -> str | None:
    """The bubblewrap binary: ``OLP_BWRAP_BIN`` or ``bwrap`` on ``PATH``."""
    configured = environ.get("OLP_BWRAP_BIN")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap", path=environ.get("PATH"))


def install_roots(binary: str, *, path_env: str | None, forbidden: Iterable[Path]) -> list[Path]:
    """The directories a CLI needs to run: its installation and its interpreter's.

    For the binary and, if it is a script, the interpreter named by its ``#!`` line (through
    ``env`` and ``PATH`` too): the enclosing ``node_modules`` tree for an npm package, the
    virtualenv and its base Python for a Python console script, otherwise the directory above
    the one holding the file (``<prefix>`` of ``<prefix>/bin/tool``). A root that would expose
    too much (``/``, or a directory holding one of ``forbidden`` — the owner's home, OLP's
    home) shrinks to the file's own directory. Blocks on a few small file reads.
    """
    fences = [p.resolve() for p in forbidden]
    roots: list[Path] = []
    todo = [Path(binary)]
    seen: set[Path] = set()
    while todo:
        exe = todo.pop()
        for path in {exe.absolute(), exe.resolve()}:
            if path in seen:
                continue
            seen.add(path)
            for root in _roots_of(path):
                root = root if not _too_broad(root, fences) else path.parent
                if not _too_broad(root, fences) and root not in roots:
                    roots.append(root)
        interpreter = _interpreter(exe.resolve(), path_env)
        if interpreter is not None:
            todo.append(interpreter)
    return roots


def _roots_of(path: Path) -> list[Path]:
    for parent in path.parents:
        if parent.name == "node_modules":
            return [parent]
        cfg = parent / "pyvenv.cfg"
        if cfg.is_file():
            base = _venv_home(cfg)
            return [parent] + ([base.parent] if base is not None else [])
    return [path.parent.parent]


def _venv_home(cfg: Path) -> Path | None:
    """The ``home`` (base interpreter's bin directory) of a ``pyvenv.cfg``."""
    try:
        lines = cfg.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return Path(value.strip()).resolve()
    return None


def _interpreter(path: Path, path_env: str | None) -> Path | None:
    """The program a ``#!`` line names (``env``'s argument looked up on ``PATH``)."""
    try:
        with path.open("rb") as f:
            head = f.readline(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not names:
            return None
        found = shutil.which(names[0], path=path_env)
        return Path(found) if found else None
    return Path(words[0])


def _too_broad(root: Path, fences: Sequence[Path]) -> bool:
    resolved = root.resolve()
    return resolved == Path("/") or any(fence.is_relative_to(resolved) for fence in fences)
