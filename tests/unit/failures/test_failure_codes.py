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
