"""CPU per delta of the stream decoder, on streams like the repairing proxy's, against a baseline.

    python tests/benchmarks/bench_stream_delta.py [--rounds 9] [--baseline REF] [--only NAME]

Each contender decodes one whole stream (a new ``StreamDecoder``, every delta fed, ``close``);
the figure is its CPU time divided by the stream's deltas. Contenders, alternated in one
process over several rounds (``tests/benchmarks/rounds.py``, min and median): today's codec and
the codec at ``--baseline`` (default: the merge base with ``main``, imported from ``git
archive``, ``tests/benchmarks/baseline.py``). The streams:

- ``prose``: 400 characters of prose in 1-8 character deltas, as text;
- ``english``: 400 characters of English prose (an ``f`` in about one delta of six), as text;
- ``prose/chunks``: the same as the choice dicts the proxy feeds (``{"index", "delta":
  {"content"}, "finish_reason", "logprobs"}``);
- ``hermes long args``: prose, then a Hermes ``<tool_call>`` whose string argument is ~600
  characters of sentences (quotes and line breaks escaped among them), in 1-8 character
  deltas;
- ``hermes q-run``: the floor bench's ``bigcall:300`` (one 300-character run of ``q``);
- ``think+call``: a ``<think>`` section then a Hermes call, in content;
- ``long think``: ~700 characters of ``<think>`` reasoning, then a short answer, in content;
- ``reasoning+call/chunks``: ``reasoning_content`` deltas (4 characters) then a call in
  content, as choice dicts;
- ``proxy mix/chunks``: the floor bench's recorded streams (``hermes_broken``, ``qwen_xml``,
  ``two_calls``, ``native_ok``), cut as the stand-in cuts them, as choice dicts.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import orjson  # noqa: E402
from toolcodec.decoding.codec import ToolCallCodec  # noqa: E402
from toolcodec.pool.proxy.demo_upstream import deltas, pieces  # noqa: E402

from tests.benchmarks import baseline  # noqa: E402
from tests.benchmarks.rounds import alternate, show  # noqa: E402
from tests.upstream_standin import CASES as RECORDED  # noqa: E402
from tests.upstream_standin import TOOLS  # noqa: E402

SENTENCES = ("The parser keeps a bounded window of what it has read. ",
             'She said "stream it" and left, ', "costs stay linear in the output; ",
             "commas, colons: and [brackets] are text here. ", "Line two\nstarts here. ")

ENGLISH = ("The forecast for the first days of the month is fair, with a front from the west "
           "on Friday. Figures from the field office follow after the summary; if anything "
           "is off, tell us before the fourth and we will fix it. Most of the rain falls in "
           "the hills, so the roads stay clear, and the ferry runs on its usual timetable. "
           "Thanks for waiting, and have a good weekend of walks and coffee in the sun.")


def as_choices(delta_list: list[dict]) -> list[dict]:
    return [{"index": 0, "delta": d, "logprobs": None, "finish_reason": None}
            for d in delta_list]


def streams() -> dict[str, list]:
    rng = random.Random(7)
    prose = "word " * 80
    long_arg = "".join(rng.choice(SENTENCES) for _ in range(14))
    call = ("<tool_call>\n" + orjson.dumps({"name": "search_files", "arguments": {
        "query": long_arg}}).decode() + "\n</tool_call>")
    qrun = ('<tool_call>{"name": "search_files", "arguments": {"query": "' + "q" * 300
            + '"}}</tool_call>')
    think = ("<think>The user wants the files about streaming; I will search for them and "
             "then answer briefly.</think>Searching now.\n" + call)
    reasoning = "The user wants the files about streaming; I will search for them first."
    reason_deltas = ([{"role": "assistant", "content": ""}]
                     + [{"reasoning_content": reasoning[i:i + 4]}
                        for i in range(0, len(reasoning), 4)]
                     + [{"content": p} for p in pieces("Searching.\n" + call, "3")])
    mix: list[dict] = []
    for case in ("hermes_broken", "qwen_xml", "two_calls", "native_ok"):
        mix += [{"stream": case}] + as_choices(deltas(RECORDED[case]))
    return {
        "prose": pieces(prose, "1"),
        "english": pieces(ENGLISH, "8"),
        "prose/chunks": as_choices([{"content": p} for p in pieces(prose, "1")]),
        "hermes long args": pieces("Let me look that up.\n" + call, "2"),
        "hermes q-run": pieces(qrun, "4"),
        "think+call": pieces(think, "5"),
        "long think": pieces("<think>" + "".join(rng.choice(SENTENCES) for _ in range(16))
                             + "</think>The answer is short.", "6"),
        "reasoning+call/chunks": as_choices(reason_deltas),
        "proxy mix/chunks": mix,
    }


def _begins(chunk: object) -> bool:
    """Whether *chunk* is the mix's mark that a new stream begins."""
    return type(chunk) is dict and "stream" in chunk


def run(codec: object, chunks: list) -> None:
    s = None
    for chunk in chunks:
        if _begins(chunk):  # the mix: a new stream begins
            if s is not None:
                s.close()
            s = codec.stream(id_prefix="x_")
            continue
        if s is None:
            s = codec.stream(id_prefix="x_")
        s.feed(chunk)
    s.close()


def same(new: object, old: object, chunks: list) -> None:
    """Both revisions answer the stream alike (what is timed is the same work)."""
    def results(codec: object) -> list:
        out, s = [], None
        for chunk in chunks:
            if _begins(chunk) or s is None:
                if s is not None:
                    out.append(orjson.dumps(s.result().to_dict()))
                s = codec.stream(id_prefix="x_")
                if _begins(chunk):
                    continue
            s.feed(chunk)
        out.append(orjson.dumps(s.result().to_dict()))
        return out
    assert results(new) == results(old)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--baseline", default=None, help="git revision (default: merge base "
                        "with main); 'none' to skip")
    parser.add_argument("--only", default=None, help="one stream by name")
    args = parser.parse_args()
    codec = ToolCallCodec(TOOLS)
    old = None
    if args.baseline != "none":
        ref = args.baseline or baseline.merge_base()
        print(f"baseline: {ref}")
        old = baseline.load(ref).ToolCallCodec(TOOLS)
    totals: dict[str, list[float]] = {"new": [0.0, 0.0], "base": [0.0, 0.0]}
    for name, chunks in streams().items():
        if args.only and name != args.only:
            continue
        n = sum(1 for c in chunks if not _begins(c))
        contenders = {"toolcodec": lambda c=chunks: run(codec, c)}
        if old is not None:
            same(codec, old, chunks)
            contenders["baseline"] = lambda c=chunks: run(old, c)
        figures = alternate(contenders, rounds=args.rounds)
        for f in figures.values():
            f.samples = [s / n for s in f.samples]
        print(f"{name}: {n} deltas ({args.rounds} alternated rounds, CPU per delta)")
        show(figures)
        if old is not None:
            new_f, base_f = figures["toolcodec"], figures["baseline"]
            print(f"  toolcodec / baseline: {new_f.min / base_f.min:.2f}x min, "
                  f"{new_f.median / base_f.median:.2f}x median")
            totals["new"][0] += new_f.min * n
            totals["new"][1] += new_f.median * n
            totals["base"][0] += base_f.min * n
            totals["base"][1] += base_f.median * n
    if old is not None and totals["base"][0]:
        print(f"all streams: toolcodec / baseline {totals['new'][0] / totals['base'][0]:.2f}x "
              f"min, {totals['new'][1] / totals['base'][1]:.2f}x median")


if __name__ == "__main__":
    main()
