"""``toolcodec kindaxml [--tags cite,note,...] [FILE|-]``: parse a document, print JSON.

The only module of the codec package that does I/O; the lead wires it into ``toolcodec``.
"""

from __future__ import annotations

import argparse
import json
import sys


def cli_main(argv: list[str]) -> int:
    """Run the ``kindaxml`` sub-command with ``argv`` (without the command name).

    Prints ``json.dumps(result.to_dict(), ensure_ascii=False)`` and returns 0; an unreadable
    input prints a one-line error on stderr and returns 2.
    """
    from codec.kindaxml import KindaXMLConfig, parse  # late: the package imports this module

    parser = argparse.ArgumentParser(
        prog="toolcodec kindaxml", description="Parse KindaXML annotations and print JSON."
    )
    parser.add_argument("--tags", help="comma-separated recognised tag names (default: spec set)")
    parser.add_argument("file", nargs="?", default="-", help="input file, or - for stdin")
    args = parser.parse_args(argv)
    try:
        if args.tags is None:
            config = KindaXMLConfig()
        else:
            tags = [t.strip() for t in args.tags.split(",") if t.strip()]
            config = KindaXMLConfig(recognized_tags=tags)
    except ValueError as exc:  # a --tags entry that is not a tag name
        print(f"toolcodec kindaxml: --tags: {exc}", file=sys.stderr)
        return 2
    try:
        text = _read(args.file)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"toolcodec kindaxml: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(parse(text, config=config).to_dict(), ensure_ascii=False))
    return 0


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8")
    with open(path, encoding="utf-8") as handle:
        return handle.read()
