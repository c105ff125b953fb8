"""The ``toolcodec`` command, run as a user would: a subprocess with real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "toolcodec.pool.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize("mode", [[], ["--in-process"]])
def test_decode_example_through_pool_and_in_process(mode: list[str]) -> None:
    proc = run_cli("decode", *mode, "--tools", str(EXAMPLES / "tools.json"),
                   str(EXAMPLES / "output.txt"))
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert result["path"] == "xml"
    assert [c["name"] for c in result["calls"]] == ["get_weather", "search_files"]
    weather, search = (c["arguments"] for c in result["calls"])
    assert weather == {"city": "תל אביב", "days": 3}
    assert search == {"pattern": "func.*&&.*return", "case_sensitive": True}
    assert result["reasoning"] == "The user wants the weather in Tel Aviv and a search."
    assert result["content"].startswith("Let me check that for you.")
    assert result["content"].endswith("I'll report back shortly.")
    assert "text.bidi_removed" in result["repairs"]


def test_decode_reads_stdin_and_message_mode() -> None:
    message = {
        "role": "assistant",
        "content": "On it.",
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{'city': 'Paris',}"}}],
    }
    proc = run_cli("decode", "--in-process", "--message", "--tools",
                   str(EXAMPLES / "tools.json"), "-", stdin=json.dumps(message).encode())
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert result["path"] == "native"
    assert result["calls"][0]["arguments"] == {"city": "Paris"}
    assert result["content"] == "On it."


def test_repair_prints_result_and_exit_code_follows_ok() -> None:
    good = run_cli("repair", "--in-process", "-", stdin=b"{'a': 1, 'b': [1, 2,],}")
    assert good.returncode == 0
    assert json.loads(good.stdout)["value"] == {"a": 1, "b": [1, 2]}
    bad = run_cli("repair", "--in-process", "-", stdin=b'{"amount": 100 * 3}')
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["errors"][0]["code"] == "arithmetic_expression"


def test_bad_tools_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text('[{"type": "function", "function": {"parameters": {}}}]')
    proc = run_cli("decode", "--tools", str(tools), str(EXAMPLES / "output.txt"))
    assert proc.returncode == 2
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("toolcodec decode: tools file")


@pytest.mark.parametrize("content", [b"not json", b'{"a": 1}'])
def test_tools_file_that_is_not_a_tool_list(tmp_path: Path, content: bytes) -> None:
    tools = tmp_path / "tools.json"
    tools.write_bytes(content)
    proc = run_cli("decode", "--tools", str(tools), str(EXAMPLES / "output.txt"))
    assert proc.returncode == 2
    assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_unreadable_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = run_cli("repair", str(tmp_path / "nope.json"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr.decode()
    binary = tmp_path / "bin.json"
    binary.write_bytes(b'{"a": "\xff"}')
    proc = run_cli("repair", str(binary))
    assert proc.returncode == 2
    assert "not UTF-8" in proc.stderr.decode()
    assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_kindaxml_subcommand() -> None:
    proc = run_cli("kindaxml", "--tags", "cite", "-",
                   stdin=b'We shipped <cite id="1">last week</cite>.')
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    texts = [s["text"] for s in result["segments"]]
    assert "".join(texts) == "We shipped last week."
    cited = [s for s in result["segments"] if s["annotations"]]
    assert cited[0]["text"] == "last week"
    assert cited[0]["annotations"][0]["tag"] == "cite"


def test_formats_flag_restricts_what_is_read_and_refuses_unknown_ids() -> None:
    text = b'[TOOL_CALLS]get_weather{"city": "Oslo"}'
    tools = str(EXAMPLES / "tools.json")
    every = run_cli("decode", "--in-process", "--tools", tools, "-", stdin=text)
    assert every.returncode == 0, every.stderr.decode()
    assert [c["format"] for c in json.loads(every.stdout)["calls"]] == ["mistral"]
    only = run_cli("decode", "--in-process", "--formats", "hermes,qwen_xml", "--tools", tools,
                   "-", stdin=text)
    assert json.loads(only.stdout)["calls"] == []
    bad = run_cli("decode", "--formats", "klingon", "--tools", tools, "-", stdin=text)
    assert bad.returncode == 2 and b"unknown format" in bad.stderr
    assert len(bad.stderr.decode().strip().splitlines()) == 1


def test_text_past_max_chars_prints_the_same_result_with_and_without_the_pool(
        tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x" * 150 + ' <tool_call>{"name": "a", "arguments": {}}</tool_call>')
    outs = []
    for mode in ([], ["--in-process"]):
        proc = subprocess.run([sys.executable, "-m", "toolcodec.pool.cli", "decode", *mode,
                               str(big)], capture_output=True, cwd=ROOT, timeout=60,
                              env={**os.environ, "TOOLCODEC_MAX_CHARS": "100"})
        assert proc.returncode == 1, proc.stderr.decode()  # printed, and says ok: false
        assert proc.stderr == b""
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    assert [e["code"] for e in outs[0]["errors"]] == ["payload_too_large"]
    assert outs[0]["content"] == big.read_text().strip()


def test_a_job_over_its_budget_is_not_finished_with_and_without_the_pool(tmp_path: Path) -> None:
    # A 1 MB argument takes milliseconds to decode: over a 1 ms budget in both modes.
    big = tmp_path / "big.txt"
    big.write_text('<tool_call>{"name": "a", "arguments": {"q": "' + "q" * 1_000_000
                   + '"}}</tool_call>')
    for mode in ([], ["--in-process"]):
        proc = run_cli("decode", *mode, "--timeout-ms", "1", str(big))
        assert proc.returncode == 1 and proc.stdout == b"", proc.stdout[:200]
        assert proc.stderr.startswith(b"toolcodec decode: "), proc.stderr
        assert b": timeout: " in proc.stderr or b": rejected: " in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv,prog", [
    (["decode", "--bogus"], "toolcodec decode"),
    (["kindaxml", "--bogus"], "toolcodec kindaxml"),
    (["bench", "capacity", "--bogus"], "toolcodec bench capacity"),
    (["serve", "--port", "0"], "toolcodec serve"),
])
def test_usage_errors_name_the_sub_command(argv: list[str], prog: str) -> None:
    proc = run_cli(*argv)
    assert proc.returncode == 2
    assert proc.stderr.decode().startswith(f"{prog}: "), proc.stderr.decode()
    assert f"(see {prog} -h)" in proc.stderr.decode()


def _flags(parser) -> list:
    import argparse

    quiet = argparse._HelpAction | argparse._VersionAction
    return [a for a in parser._actions if a.option_strings and not isinstance(a, quiet)]


def test_every_flag_of_every_command_says_what_it_does() -> None:
    import argparse

    from toolcodec.pool.cli import build_parser

    def walk(parser, name):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    yield from walk(child, f"{name} {sub}")

    missing = [f"{name} {'/'.join(a.option_strings)}"
               for name, parser in walk(build_parser(), "toolcodec")
               for a in _flags(parser) if not (a.help or "").strip()]
    assert missing == []


def test_kindaxml_synopsis_and_version() -> None:
    import toolcodec

    usage = run_cli("kindaxml", "-h").stdout.decode()
    assert usage.startswith("usage: toolcodec kindaxml [-h] [--tags TAG,TAG] [FILE|-]")
    assert run_cli("--version").stdout.decode().strip() == f"toolcodec {toolcodec.__version__}"
