"""The direction of dependencies between OLP's packages (docs/architecture.md).

Every module under ``olp/`` is parsed with :mod:`ast` (nothing is imported) and each of its
``olp.*`` imports is checked: absolute and relative, at module level, inside functions and
under ``if TYPE_CHECKING``. A package may import itself and packages of a strictly lower rank
only, so two packages of the same rank (``olp.actors`` and ``olp.cache``) never import each
other. The command line (``olp.commands``, the top rank) may import anything.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

OLP_DIR: Final = Path(__file__).resolve().parents[2] / "olp"

#: The layer of each unit (``olp.<first component>``, a room); higher ranks import lower ones.
RANKS: Final[dict[str, int]] = {
    "olp.ir": 0, "olp.store": 0,
    "olp.failures": 1,
    "olp.accounting": 2,
    "olp.actors": 3, "olp.cache": 3,
    "olp.providers": 4,
    "olp.config": 5, "olp.engine": 5, "olp.lockdown": 5, "olp.logins": 5,
    "olp.http": 6,
    "olp.runtime": 7,
    "olp.commands": 8, "olp.__main__": 8,
}
#: The command line sits on top: it may import anything.
TOP: Final = 8
#: The root package holds only ``__version__``: every layer may import it, it imports nothing.
ROOT: Final = "olp"


@dataclass(frozen=True, slots=True)
class Violation:
    module: str
    line: int
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target} ({self.reason})"


def module_name(path: Path, root: Path = OLP_DIR) -> str:
    """``olp/providers/kit.py`` → ``olp.providers.kit``; ``olp/ir/__init__.py`` → ``olp.ir``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _known_modules(root: Path = OLP_DIR) -> frozenset[str]:
    return frozenset(module_name(p, root) for p in root.rglob("*.py"))


def _resolve_base(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module a ``from`` import names (``level`` dots, then ``name``)."""
    if level == 0:
        return name or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        package = package[: len(package) - (level - 1)]
    return ".".join([*package, *([name] if name else [])])


def olp_imports(source: str, module: str, *, is_package: bool = False,
                known: frozenset[str] | None = None) -> list[tuple[int, str]]:
    """Every ``olp`` module ``source`` imports, as ``(line, module)``, wherever the import
    statement sits. ``from P import X`` counts as ``P.X`` when that is a module of ours."""
    known = _known_modules() if known is None else known
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_base(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if sub in known else base))
    return sorted((line, t) for line, t in found if t == ROOT or t.startswith(ROOT + "."))


def unit_of(module: str) -> str:
    """The layering unit: the root package or ``olp.<first component>``."""
    return ".".join(module.split(".")[:2])


def check_module(source: str, module: str, *, is_package: bool = False,
                 known: frozenset[str] | None = None) -> list[Violation]:
    """The imports of one module that break the layering."""
    src_unit = unit_of(module)
    if src_unit == ROOT:
        return [Violation(module, line, target, "the root package imports nothing of ours")
                for line, target in olp_imports(source, module, is_package=is_package,
                                                known=known)]
    if src_unit not in RANKS:
        return [Violation(module, 0, "-", f"{src_unit} has no rank: add it to RANKS")]
    src_rank = RANKS[src_unit]
    out: list[Violation] = []
    for line, target in olp_imports(source, module, is_package=is_package, known=known):
        dst_unit = unit_of(target)
        if dst_unit in (ROOT, src_unit) or src_rank == TOP:
            continue
        dst_rank = RANKS.get(dst_unit)
        if dst_rank is None:
            out.append(Violation(module, line, target, f"{dst_unit} has no rank"))
        elif dst_rank >= src_rank:
            out.append(Violation(module, line, target,
                                 f"rank {src_rank} {src_unit} -> rank {dst_rank} {dst_unit}"))
    return out


def check_tree(root: Path = OLP_DIR) -> list[Violation]:
    known = _known_modules(root)
    out: list[Violation] = []
    for path in sorted(root.rglob("*.py")):
        out.extend(check_module(path.read_text(encoding="utf-8"), module_name(path, root),
                                is_package=path.name == "__init__.py", known=known))
    return out


def test_every_olp_module_respects_the_layering() -> None:
    assert OLP_DIR.is_dir()
    violations = check_tree()
    assert not violations, "layering violations:\n" + "\n".join(map(str, violations))


def test_every_package_has_a_rank() -> None:
    units = {unit_of(m) for m in _known_modules()} - {ROOT}
    assert units <= RANKS.keys(), f"unranked: {sorted(units - RANKS.keys())}"


_KNOWN: Final = frozenset({
    "olp", "olp.ir", "olp.ir._events", "olp.failures", "olp.failures._codes", "olp.actors",
    "olp.providers", "olp.providers.kit", "olp.actors._deadline", "olp.cache", "olp.cache._key",
    "olp.config", "olp.engine", "olp.http", "olp.runtime.provider_actors"})

_BAD_ACTORS_MODULE: Final = '''
from __future__ import annotations

from typing import TYPE_CHECKING

from olp.ir import ChatRequest
from ..failures import Code
from . import kit
from ._deadline import Timeouts

if TYPE_CHECKING:
    from olp.cache import CacheStore

def late() -> None:
    from .. import http
    import olp.engine._engine
'''


def test_the_checker_catches_violations_wherever_the_import_sits() -> None:
    found = check_module(_BAD_ACTORS_MODULE, "olp.actors._runner", known=_KNOWN)
    assert [(v.line, v.target) for v in found] == [
        (12, "olp.cache"),              # same rank, other package, under TYPE_CHECKING
        (15, "olp.http"),               # relative, function-local, higher rank
        (16, "olp.engine._engine"),     # absolute, function-local, higher rank
    ]
    message = "\n".join(map(str, found))
    assert "olp.actors._runner:12 imports olp.cache (rank 3 olp.actors -> rank 3 olp.cache)" \
        in message


@pytest.mark.parametrize(("module", "is_package", "source", "target"), [
    ("olp.actors._cli_runner", False, "from ._deadline import Timeouts", "olp.actors._deadline"),
    ("olp.providers", True, "from .kit import SPECS", "olp.providers.kit"),
    ("olp.providers.codex._spec", False, "from .. import kit", "olp.providers.kit"),
    ("olp.providers.codex._spec", False, "from ...failures import Code", "olp.failures"),
    ("olp.commands.doctor", False, "from olp.runtime import provider_actors",
     "olp.runtime.provider_actors"),
    ("olp.http._app", False, "from olp import __version__", "olp"),
])
def test_imports_are_resolved(module: str, is_package: bool, source: str, target: str) -> None:
    assert olp_imports(source, module, is_package=is_package, known=_KNOWN) == [(1, target)]


def test_allowed_imports_pass() -> None:
    assert check_module("from olp.providers import kit\nfrom olp import __version__\n",
                        "olp.config._load", known=_KNOWN) == []
    assert check_module("import olp.http\nimport olp.engine\n", "olp.runtime.server",
                        known=_KNOWN) == []
