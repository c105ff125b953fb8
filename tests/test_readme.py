"""README.md's Python examples run, and print what the README says they print.

An expression statement followed by a comment block starting ``# {`` or ``# [`` is
evaluated and compared with that comment (read as a Python literal).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def expectations(code: str) -> list[tuple[ast.stmt, object]]:
    """(statement, expected value) for each statement followed by an expected-value comment."""
    lines = code.splitlines()
    found = []
    for stmt in ast.parse(code).body:
        comment, i = [], stmt.end_lineno  # the line after the statement (0-based index)
        while i < len(lines) and lines[i].startswith("#"):
            comment.append(lines[i][1:].strip())
            i += 1
        if comment and comment[0][:1] in "{[":
            found.append((stmt, ast.literal_eval(" ".join(comment))))
    return found


def test_readme_has_python_examples() -> None:
    assert BLOCKS, "README.md lost its Python examples"


def test_readme_blocks_run_in_order_and_match() -> None:
    namespace: dict[str, object] = {}  # later blocks build on earlier ones, as a reader does
    for code in BLOCKS:
        expected = {stmt.lineno: value for stmt, value in expectations(code)}
        for stmt in ast.parse(code).body:
            if stmt.lineno in expected:
                assert isinstance(stmt, ast.Expr), ast.unparse(stmt)
                got = eval(compile(ast.Expression(stmt.value), "README", "eval"), namespace)
                assert got == expected[stmt.lineno], ast.unparse(stmt)
            else:
                exec(compile(ast.Module([stmt], []), "README", "exec"), namespace)


def test_expectations_are_found() -> None:
    assert sum(len(expectations(code)) for code in BLOCKS) >= 5


def test_a_wrong_expectation_fails() -> None:
    code = "x = [1, 2]\nx\n# [1, 3]\n"
    assert [value for _, value in expectations(code)] == [[1, 3]]
    backup = list(BLOCKS)
    try:
        BLOCKS[:] = [code]
        try:
            test_readme_blocks_run_in_order_and_match()
        except AssertionError:
            return
        raise AssertionError("a README expectation that does not hold went unnoticed")
    finally:
        BLOCKS[:] = backup
