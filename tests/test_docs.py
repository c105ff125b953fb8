"""Every example in README.md and docs/*.md runs as written, and prints what the text says.

- ```python blocks run in order, one namespace per file (later blocks build on earlier ones, as
  a reader does). An expression statement followed by a comment block starting ``# {`` or
  ``# [`` is evaluated and compared with that comment (read as a Python literal).
- ```bash blocks run with ``bash -euo pipefail`` from the repository's root, as written; the
  process group is killed afterwards, so a server a block starts in the background stops. A
  ```json block right after a ```bash block is the output of its last command (compared as
  JSON; ``elapsed_ms``, which differs every run, only has to be a number).
- A ```text output block right after a ```bash block is the output of its last command, line
  for line (the block's last lines: a server it starts may print before).
- ```json, ```yaml and ```toml blocks must parse; one whose fence says ``file=PATH`` is that
  file of the repository, to the letter. Blocks without a language, or ```text, are synopses,
  layouts and sample envelopes: not run.
- A block whose fence says ``norun`` (```bash norun) is not run; the block must say why in a
  comment on its first line (it needs a cluster, a Docker engine, or runs for minutes).

The model server the examples talk to is ``toolcodec demo-upstream``, the shipped STAND-IN
that replays recorded outputs: no model runs here. Bash examples start their own (and stop
it); Python examples read its URL from ``MODEL_URL``. The examples' ports are variables
(``MODEL_PORT``, ``PORT``; 8000 and 8080 by default): the test gives them free ports, so it
passes with a model server, or anything else, on 8000 and 8080.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.demo_process import DemoProcess
from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
TEST_COMMAND = "python3 -m pip install -e '.[test]' && python3 -m pytest"
# The examples' `toolcodec` and `python3` are the suite's own (its virtualenv's bin first),
# whether or not that virtualenv is activated.
SUITE_PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    flags: tuple[str, ...]
    code: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        info = m.group(1).split()
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(path, line, info[0] if info else "", tuple(info[1:]), m.group(2)))
    return out


ALL = [b for path in FILES for b in blocks(path)]


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


def run_python(code: str, namespace: dict[str, object], where: str) -> None:
    expected = {stmt.lineno: value for stmt, value in expectations(code)}
    for stmt in ast.parse(code).body:
        if stmt.lineno in expected:
            assert isinstance(stmt, ast.Expr), f"{where}: {ast.unparse(stmt)}"
            got = eval(compile(ast.Expression(stmt.value), where, "eval"), namespace)
            assert got == expected[stmt.lineno], f"{where}: {ast.unparse(stmt)}"
        else:
            exec(compile(ast.Module([stmt], []), where, "exec"), namespace)


@pytest.fixture(scope="module")
def model_server():
    server = DemoProcess().start()
    yield server
    server.stop()


def run_bash(block: Block, tmp: Path) -> str:
    # Files, not pipes: a server the block leaves in the background keeps a pipe open.
    out, err = tmp / "stdout", tmp / "stderr"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", block.code], cwd=ROOT,
                                stdout=o, stderr=e, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "PATH": SUITE_PATH})
        try:
            proc.wait(timeout=300)
        finally:
            try:  # the block's background servers go with it
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 0, \
        f"{block} exited {proc.returncode}:\n{err.read_text(errors='replace')[-3000:]}"
    return out.read_text()


def same_output(got: object, want: object) -> bool:
    if isinstance(want, dict) and isinstance(got, dict):
        if set(want) != set(got):
            return False
        return all(isinstance(got[k], int | float) if k == "elapsed_ms" else
                   same_output(got[k], want[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(map(same_output, got, want))
    return got == want


def _runnable(block: Block) -> bool:
    return "norun" not in block.flags and block.code.strip() != TEST_COMMAND


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run_as_written(path: Path, model_server, monkeypatch,
                                  tmp_path: Path) -> None:
    monkeypatch.setenv("MODEL_URL", model_server.url + "/v1")
    monkeypatch.setenv("MODEL_PORT", str(free_port()))
    monkeypatch.setenv("PORT", str(free_port()))
    found = blocks(path)
    namespace: dict[str, object] = {}
    for i, block in enumerate(found):
        if block.lang == "python":
            run_python(block.code, namespace, str(block))
        elif block.lang in ("bash", "sh") and _runnable(block):
            out = run_bash(block, tmp_path)
            after = found[i + 1] if i + 1 < len(found) else None
            if after is not None and after.lang == "json" and _adjacent(path, block, after):
                last = out.strip().splitlines()[-1] if out.strip() else ""
                assert same_output(json.loads(last), json.loads(after.code)), \
                    f"{block}: printed {last}, the text says {after.code}"
            if after is not None and after.lang == "text" and "output" in after.flags \
                    and _adjacent(path, block, after):
                want = after.code.strip().splitlines()  # the last command's: the block's end
                assert out.strip().splitlines()[-len(want):] == want, \
                    f"{block}: printed {out!r}, the text says {after.code!r}"
        elif block.lang == "json":
            json.loads(block.code)
        elif block.lang == "yaml":
            list(yaml.safe_load_all(block.code))
        elif block.lang == "toml":
            tomllib.loads(block.code)
        for flag in block.flags:
            if flag.startswith("file="):
                assert (ROOT / flag[5:]).read_text() == block.code, \
                    f"{block} is not {flag[5:]} as the repository has it"


def _adjacent(path: Path, first: Block, second: Block) -> bool:
    """Only blank lines between the end of *first* and the start of *second*."""
    lines = path.read_text(encoding="utf-8").splitlines()
    end = first.line + first.code.count("\n") + 1  # the closing fence's line (1-based)
    return all(not line.strip() for line in lines[end:second.line - 1])


def test_output_blocks_follow_a_command() -> None:
    for path in FILES:
        found = blocks(path)
        for before, block in zip(found, found[1:], strict=False):
            if block.lang == "text" and "output" in block.flags:
                assert before.lang in ("bash", "sh") and _adjacent(path, before, block), block


def test_norun_blocks_say_why() -> None:
    for block in ALL:
        if "norun" in block.flags:
            first = block.code.splitlines()[0] if block.code.strip() else ""
            assert first.lstrip().startswith("#"), f"{block}: a norun block says why on line 1"


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    readme = [b.code.strip() for b in blocks(ROOT / "README.md") if b.lang == "bash"]
    assert TEST_COMMAND in readme
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text()


def test_every_doc_is_reachable_from_the_readme() -> None:
    docs = ROOT / "docs"
    linked = {(docs / m).resolve() for m in re.findall(r"\]\(docs/([\w./-]+\.md)",
                                                        (ROOT / "README.md").read_text())}
    for doc in docs.rglob("*.md"):
        linked |= {(doc.parent / m).resolve()
                   for m in re.findall(r"\]\(([\w./-]+\.md)", doc.read_text())}
    assert set(docs.rglob("*.md")) <= linked


def test_the_examples_use_no_fixed_port() -> None:
    """A port is a variable with a default (``"${PORT:=8080}"``), so that the examples run
    beside a model server on 8000 and this test runs anywhere."""
    for block in ALL:
        if block.lang in ("bash", "sh") and _runnable(block):
            assert not re.search(r"(--port |localhost:|127\.0\.0\.1:)\d", block.code), block


def test_expectations_are_found_and_a_wrong_one_fails() -> None:
    assert sum(len(expectations(b.code)) for b in ALL if b.lang == "python") >= 10
    with pytest.raises(AssertionError):
        run_python("x = [1, 2]\nx\n# [1, 3]\n", {}, "inline")
    assert not same_output({"a": 1, "elapsed_ms": 2.0}, {"a": 2, "elapsed_ms": 1.0})
    assert same_output({"a": 1, "elapsed_ms": 2.0}, {"a": 1, "elapsed_ms": 1.0})


def _flags_of(command: str) -> set[str]:
    from toolcodec.pool.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {s for a in sub.choices[command]._actions for s in a.option_strings
            if s.startswith("--") and s != "--help"}


@pytest.mark.parametrize("command,docs", [
    ("serve", ("http.md", "proxy.md")),
    ("demo-upstream", ("proxy.md",)),
    ("worker", ("rq.md", "security.md", "cli.md")),
    ("decode", ("cli.md",)),
    ("repair", ("cli.md",)),
])
def test_every_flag_is_documented(command: str, docs: tuple[str, ...]) -> None:
    text = "".join((ROOT / "docs" / d).read_text() for d in docs)
    missing = sorted(f for f in _flags_of(command) if f"`{f}" not in text and f"[{f}" not in text)
    assert missing == [], f"toolcodec {command} flags missing from {docs}"
