"""Every failure code is defined once, in ``olp.failures``, and has a default category."""

from __future__ import annotations

import ast
from pathlib import Path

from olp.failures import DEFAULT_CATEGORY, Code, failure
from olp.ir import CATEGORIES

OLP = Path(__file__).resolve().parents[3] / "olp"
CODES = {code.value for code in Code}


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """String literals of ``path`` outside docstrings, with their line numbers."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_no_code_string_is_spelled_out_outside_the_failure_module() -> None:
    offenders = [f"{path.relative_to(OLP.parent)}:{line}: {value!r}"
                 for path in sorted(OLP.rglob("*.py"))
                 if "failures" not in path.relative_to(OLP).parts
                 for line, value in _string_constants(path) if value in CODES]
    assert offenders == [], "use olp.failures.Code instead:\n" + "\n".join(offenders)


def test_the_check_above_would_catch_a_code_string(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""Mentions RATE_LIMITED in a docstring: allowed."""\n'
                      'X = "RATE_LIMITED"\n')
    assert _string_constants(sample) == [(2, "RATE_LIMITED")]


def test_every_code_has_a_default_category_and_equals_its_name() -> None:
    assert set(DEFAULT_CATEGORY) == set(Code)
    assert set(DEFAULT_CATEGORY.values()) <= set(CATEGORIES)
    for code in Code:
        assert code == code.name and str(code) == code.name


def test_failure_builds_an_error_in_the_default_category() -> None:
    error = failure(Code.IDLE_TIMEOUT, "silent")
    assert (error.code, error.category, error.message) == ("IDLE_TIMEOUT", "unavailable", "silent")
    assert failure(Code.UPSTREAM_5XX, "x", category="unknown", status=502).category == "unknown"


def _direct_errors(path: Path) -> list[int]:
    """Lines of ``path`` that build an ``Error`` with a code directly (``Error(code=…)``,
    ``ir.Error(code=…)``, or with positional arguments) instead of through ``failure()``."""
    tree = ast.parse(path.read_text(), str(path))
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Call)
                  and (isinstance(node.func, ast.Name) and node.func.id == "Error"
                       or isinstance(node.func, ast.Attribute) and node.func.attr == "Error")
                  and (node.args or any(k.arg == "code" for k in node.keywords)))


def test_every_error_is_built_through_failure() -> None:
    """``failure()`` gives an error its code's default category, so the two cannot drift
    apart; a direct ``Error(code=…)`` outside ``olp.failures`` bypasses that."""
    offenders = [f"{path.relative_to(OLP.parent)}:{line}"
                 for path in sorted(OLP.rglob("*.py"))
                 if "failures" not in path.relative_to(OLP).parts
                 for line in _direct_errors(path)]
    assert offenders == [], "build these through olp.failures.failure():\n" + "\n".join(
        offenders)


def test_the_check_above_would_catch_a_direct_error(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""Error(code=X) in a docstring: allowed."""\n'
                      'from olp import ir\n'
                      'a = Error(code=Code.CLI_FAILED, category="unknown", message="m")\n'
                      'b = ir.Error(code=c, category="unknown", message="m")\n'
                      'c = failure(Code.CLI_FAILED, "m")\n'
                      'd = isinstance(a, Error)\n')
    assert _direct_errors(sample) == [3, 4]
