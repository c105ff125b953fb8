"""Runs INSIDE the vLLM environment (``tests/envs/vllm_env.py``): vLLM's own parser classes
on the cases it is given, the way vLLM's chat server drives them.

Reads one JSON job on stdin, writes one JSON answer on stdout::

    {"mode": "entry_point" | "plugin_path", "plugin_path": str (plugin_path mode),
     "parsers": ["toolcodec", "hermes", ...],
     "cases": [{"id", "text", "tools", "tool_choice"?, "max_completion_tokens"?,
                "reasoning_parser"?}, ...]}

``entry_point`` loads vLLM's general plugins (the entry points installed packages declare);
``plugin_path`` loads none (``VLLM_PLUGINS`` empty) and imports the given file as
``--tool-parser-plugin`` does. For every case and parser the answer has ``whole``
(``ToolParserManager.get_tool_parser(name)(...).extract_tool_calls``), ``composed`` (vLLM's
``Parser.parse`` of the whole output, with the case's reasoning parser if it names one) and
``stream`` (the same ``Parser``'s ``parse_delta``, one token at a time, ``finished`` on the
last one, as vLLM's chat stream processor calls it). The tokenizer is a byte-level BPE
trained here on the cases themselves, with the families' markers as special tokens (no model
is downloaded).
"""

from __future__ import annotations

import json
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

MARKERS = ["<tool_call>", "</tool_call>", "<think>", "</think>",
           "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
           "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"]


def tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=MARKERS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe)


def request_of(case: dict):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    tools = [t if "function" in t else {"type": "function", "function": t}  # bare: wrapped
             for t in case["tools"]]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "tools": tools, "tool_choice": case.get("tool_choice", "auto")}
    if case.get("max_completion_tokens"):
        body["max_completion_tokens"] = case["max_completion_tokens"]
    return ChatCompletionRequest.model_validate(body)


def call_dict(name: str, arguments: str) -> dict:
    try:
        return {"name": name, "arguments": json.loads(arguments)}
    except ValueError:
        return {"name": name, "arguments": arguments, "unparsed": True}


def whole(name: str, tok, case: dict) -> dict:
    from vllm.tool_parsers import ToolParserManager

    request = request_of(case)
    parser = ToolParserManager.get_tool_parser(name)(tok, request.tools)
    request = parser.adjust_request(request)
    info = parser.extract_tool_calls(case["text"], request)
    return {"tools_called": info.tools_called, "content": info.content,
            "calls": [call_dict(c.function.name, c.function.arguments)
                      for c in info.tool_calls]}


def composed_parser(name: str, tok, case: dict):
    """vLLM's per-request ``Parser`` for the tool parser *name* (and the case's reasoning
    parser), and the request it adjusted."""
    from vllm.parser.parser_manager import ParserManager

    request = request_of(case)
    parser_cls = ParserManager.get_parser(tool_parser_name=name, enable_auto_tools=True,
                                          reasoning_parser_name=case.get("reasoning_parser"),
                                          tokenizer=tok)
    parser = parser_cls(tok, request.tools)
    return parser, parser.adjust_request(request)


def composed(name: str, tok, case: dict) -> dict:
    parser, request = composed_parser(name, tok, case)
    reasoning, content, calls = parser.parse(case["text"], request, enable_auto_tools=True)
    return {"reasoning": reasoning, "content": content,
            "calls": [call_dict(c.name, c.arguments) for c in calls or []]}


def stream(name: str, tok, case: dict) -> dict:
    parser, request = composed_parser(name, tok, case)
    ids = tok.encode(case["text"], add_special_tokens=False)
    prompt = tok.encode("user: hi\nassistant:", add_special_tokens=False)  # no reasoning open
    content, reasoning, calls = [], [], {}
    previous = ""
    for i in range(len(ids)):
        text = tok.decode(ids[: i + 1], skip_special_tokens=False)
        delta, previous = text[len(previous):], text
        message = parser.parse_delta(delta_text=delta, delta_token_ids=[ids[i]],
                                     request=request, prompt_token_ids=prompt,
                                     finished=i == len(ids) - 1)
        if message is None:
            continue
        content.append(message.content or "")
        reasoning.append(message.reasoning or "")
        for tc in message.tool_calls:
            slot = calls.setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function is not None:
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
    return {"content": "".join(content), "reasoning": "".join(reasoning) or None,
            "calls": [call_dict(c["name"], c["arguments"]) for _, c in sorted(calls.items())],
            "tokens": len(ids), "text_roundtrip": previous == case["text"]}


def main() -> None:
    job = json.load(sys.stdin)
    if job["mode"] == "entry_point":
        from vllm.plugins import load_general_plugins

        load_general_plugins()
    else:
        from vllm.tool_parsers import ToolParserManager

        ToolParserManager.import_tool_parser(job["plugin_path"])
    from vllm.tool_parsers import ToolParserManager

    tok = tokenizer([case["text"] for case in job["cases"]]) if job["cases"] else None
    out = {"registered": ToolParserManager.list_registered(), "cases": {}}
    for case in job["cases"]:
        tokens = len(tok.encode(case["text"], add_special_tokens=False))
        if case.get("max_completion_tokens") == "all":  # cut exactly at the end of the text
            case["max_completion_tokens"] = tokens
        out["cases"][case["id"]] = {name: {"whole": whole(name, tok, case),
                                           "composed": composed(name, tok, case),
                                           "stream": stream(name, tok, case)}
                                    for name in job["parsers"]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
