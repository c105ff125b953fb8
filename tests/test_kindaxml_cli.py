"""``toolcodec.pool.cli.kindaxml_main``: the ``toolcodec kindaxml`` sub-command."""

from __future__ import annotations

import io
import json
import sys

from toolcodec.kindaxml import parse
from toolcodec.pool.cli import kindaxml_main as cli_main

DOC = "We shipped last week <cite id=1> <note>Détails…</note>\n"


def test_reads_a_file_and_prints_the_result(tmp_path, capsys):
    path = tmp_path / "doc.txt"
    path.write_text(DOC, encoding="utf-8")
    assert cli_main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "Détails…" in out  # ensure_ascii=False
    assert json.loads(out) == parse(DOC).to_dict()


def test_reads_stdin_with_tags(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DOC.encode())))
    assert cli_main(["--tags", "cite", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == parse(DOC, recognized_tags={"cite"}).to_dict()
    assert "<note>" in data["text"]  # note is not recognised here


def test_unreadable_input_is_a_one_line_error(tmp_path, capsys):
    assert cli_main([str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.txt" in err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe<cite>")
    assert cli_main([str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_bad_tag_name_is_reported(capsys):
    assert cli_main(["--tags", "cite,9x", "-"]) == 2
    assert "9x" in capsys.readouterr().err
