"""The marker formats: which special tokens start and end a block of each model family's calls,
and which reader reads its body. One table, read by the engine (openers and closers), by the
codec (dispatch) and by the README's format table.

A format's *id* is what ``Call.format`` says for a call read from it. The formats the engine
knows without this table (``hermes``, ``qwen_xml``, ``glm``, ``tool_tag``, ``yaml_tag``,
``tool_element``, ``json`` and ``pythonic`` in prose) are listed in ``BUILTIN``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolcodec.formats import atem, functionary, gcml, hunyuan, ifm, solar_open
from toolcodec.formats.minimax_m3 import PREFIX as _MM3


@dataclass(frozen=True, slots=True)
class MarkerFormat:
    """A family whose calls sit between special tokens.

    ``body`` is the reader: a function ``read(body, *, closed) -> FormatRead``
    (``toolcodec.formats.FormatRead``), or the name of a built-in one: ``"json"`` (the codec's
    JSON path: one call or a list), ``"json_or_pythonic"`` (JSON if the body starts with
    ``{``/``[{``, else Python calls), or a module of ``toolcodec.formats``. With
    ``keep_opener`` the opener is part of the body (a call token seen without its section
    token). With ``next_opener_ends`` a new opener of the same
    format ends the block. ``open_ended`` formats have no end token at all: the end of the
    generation ends them and is not a repair. ``needs_body`` openers that are ordinary words
    count only when a body follows them (``"json"``: JSON; a pattern: JSON or what the pattern
    matches within 160 characters), so prose that names them stays prose. ``at_start``
    openers continue a header the prompt began (gpt-oss's
    ``<|start|>assistant`` then the recipient), so they count only where the output starts.
    An end token inside one of the body's ``quotes`` strings (``"`` for JSON, with its
    escapes; a quote token such as Gemma's ``<|"|>``) is the string's text. ``call_ends``
    are the tokens that end each call of a section holding several: when the output was cut
    inside the section, the calls before the last of them are complete and kept. ``end``,
    when given, is the block's end rule instead (``toolcodec.formats.open_block.EndRule``).
    """

    id: str
    openers: tuple[str, ...]
    closers: tuple[str, ...] = ()
    body: str | Callable[..., Any] = "json"
    keep_opener: bool = False
    next_opener_ends: bool = False
    open_ended: bool = False
    needs_body: str | re.Pattern[str] = ""  # "" | "json" | a head pattern
    at_start: bool = False  # the openers count only at the start of the output (past blanks)
    quotes: tuple[str, ...] = ()  # strings in the body, inside which an end token is text
    call_ends: tuple[str, ...] = ()  # per-call end tokens of a section of several calls
    # written after a tool's name and dropped when only the name without it is a known tool
    name_suffix: str = ""
    # how a block ends, when closers and the options above do not say it
    # (``toolcodec.formats.open_block.EndRule``)
    end: Callable[..., Any] | None = None


_DS_BAR, _DS_SP = "\uff5c", "\u2581"  # DeepSeek's token spelling: ｜ and ▁


def _deepseek(token: str) -> tuple[str, ...]:
    """A DeepSeek token as the model writes it, and as servers that re-spell it print it."""
    native = "<" + _DS_BAR + token.replace("_", _DS_SP) + _DS_BAR + ">"
    return tuple(dict.fromkeys((native, f"<|{token.replace('_', _DS_SP)}|>", f"<|{token}|>")))


_JSON = ('"',)  # JSON strings
# What follows an opener that is an ordinary word, for it to open a block (``needs_body``):
# a Python call (OLMo's <function_calls>), or MiniCPM's `<function name="` then the name, the
# tag's end, and a parameter or the close tag.
_CALL_HEAD = re.compile(r"[ \t\r\n]*[A-Za-z_][\w.]{0,127}[ \t]*\(")
_TAG_HEAD = re.compile(r"[A-Za-z_][\w.\-]{0,127}[\"'][ \t]*>[ \t\r\n]{0,64}"
                       r"(?:<param(?:eter)?[ \t]|</function>)")
_DS_CALL_ENDS = ("<\uff5ctool\u2581call\u2581end\uff5c>", "<|tool\u2581call\u2581end|>",
                 "<|tool_call_end|>")


def _dsml(slash: str) -> tuple[str, ...]:
    return tuple(f"<{slash}{bar}DSML{bar}{name}>" for bar in (_DS_BAR, "|")
                 for name in ("function_calls", "tool_calls", " calls"))


MARKER_FORMATS: tuple[MarkerFormat, ...] = (
    # Kimi-K2, also with the singular section token some checkpoints write
    MarkerFormat("kimi_k2", ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"),
                 ("<|tool_calls_section_end|>", "<|tool_call_section_end|>"), body="kimi",
                 quotes=_JSON, call_ends=("<|tool_call_end|>",)),
    MarkerFormat("kimi_k2", ("<|tool_call_begin|>",), ("<|tool_calls_section_end|>",
                                                       "<|tool_call_section_end|>"),
                 body="kimi", keep_opener=True, quotes=_JSON, call_ends=("<|tool_call_end|>",)),
    # Kimi K3: <|open|>tools<|sep|><|open|>call tool="…" index="…"<|sep|>…<|close|>tools<|sep|>
    MarkerFormat("kimi_k3", ("<|open|>tools<|sep|>",), ("<|close|>tools<|sep|>",),
                 body="kimi_k3"),
    MarkerFormat("deepseek", _deepseek("tool_calls_begin"), _deepseek("tool_calls_end"),
                 body="deepseek", quotes=_JSON, call_ends=_DS_CALL_ENDS),
    # "<|tool_call_begin|>" is also Kimi-K2's token: the codec reads a Kimi-shaped body as
    # Kimi's, which may end at Kimi's section end
    MarkerFormat("deepseek", _deepseek("tool_call_begin"),
                 _deepseek("tool_calls_end") + ("<|tool_calls_section_end|>",),
                 body="deepseek", keep_opener=True, quotes=_JSON, call_ends=_DS_CALL_ENDS),
    # DeepSeek V3.2 / V4 DSML, in every block name and bar seen: function_calls, tool_calls,
    # and " calls" (a blank after the bar)
    MarkerFormat("deepseek_dsml", _dsml(""), _dsml("/"), body="dsml",
                 call_ends=(f"</{_DS_BAR}DSML{_DS_BAR}invoke>", "</|DSML|invoke>")),
    MarkerFormat("mistral", ("[TOOL_CALLS]",), body="mistral", next_opener_ends=True,
                 open_ended=True, quotes=_JSON),
    MarkerFormat("harmony", tuple(f"{end}{start}<|channel|>{channel} to=" for end in ("", "<|end|>")
                                  for start in ("", "<|start|>assistant")
                                  for channel in ("commentary", "analysis"))
                 + ("<|start|>assistant to=", "<|end|><|start|>assistant to="),
                 ("<|call|>", "<|end|>", "<|return|>"), body="harmony", quotes=_JSON),
    # the recipient in the role header, right after the prompt's <|start|>assistant
    MarkerFormat("harmony", ("to=functions.",), ("<|call|>", "<|end|>", "<|return|>"),
                 body="harmony", at_start=True, quotes=_JSON),
    MarkerFormat("minimax", ("<minimax:tool_call>",), ("</minimax:tool_call>",), body="invoke",
                 call_ends=("</invoke>",)),
    # MiniMax-M3: every tag prefixed (toolcodec.formats.minimax_m3)
    MarkerFormat("minimax_m3", (f"{_MM3}<tool_call>",), (f"{_MM3}</tool_call>",),
                 body="minimax_m3", call_ends=(f"{_MM3}</invoke>",)),
    MarkerFormat("dots", ("<dots_function_call>",), ("</dots_function_call>",), body="invoke"),
    MarkerFormat("seed_oss", ("<seed:tool_call>",), ("</seed:tool_call>",), body="qwen_xml"),
    MarkerFormat("lfm2", ("<|tool_call_start|>",), ("<|tool_call_end|>",),
                 body="json_or_pythonic"),
    # Llama 3.1's built-in tools are written NAME.call(…) after <|python_tag|>
    MarkerFormat("llama", ("<|python_tag|>",), ("<|eom_id|>", "<|eot_id|>"),
                 body="json_or_pythonic", open_ended=True, name_suffix=".call"),
    MarkerFormat("llama", ("<|python_start|>",), ("<|python_end|>",), body="json_or_pythonic"),
    MarkerFormat("olmo", ("<function_calls>",), ("</function_calls>",), body="pythonic",
                 needs_body=_CALL_HEAD),
    MarkerFormat("granite", ("<|tool_call|>",), body="json", open_ended=True,
                 next_opener_ends=True),
    MarkerFormat("granite_fc", ("<function_call>",), ("</function_call>",), body="json",
                 next_opener_ends=True, open_ended=True, needs_body="json"),
    MarkerFormat("internlm", ("<|action_start|><|plugin|>",), ("<|action_end|>",), body="json"),
    # Hunyuan A13B (a JSON list) and HY3 (<tool_call>NAME<tool_sep>…, toolcodec.formats.hunyuan)
    MarkerFormat("tool_calls", ("<tool_calls>",), ("</tool_calls>",), body="tool_calls",
                 needs_body=hunyuan.HEAD),
    # Hy3 and HY4 checkpoints' tokens with a suffix (<tool_calls:opensource>,
    # <tool_calls:6124c78e>): the suffix is read from the opener, the end rule and reader use it
    MarkerFormat("tool_calls", (hunyuan.SUFFIXED_OPENER,), body=hunyuan.read_suffixed,
                 needs_body=hunyuan.SUFFIXED_HEAD, end=hunyuan.suffixed_end,
                 call_ends=("</tool_call:opensource>",)),
    # Functionary v3.2: >>>NAME⏎{json}, to the end of the value or the next >>>
    MarkerFormat("functionary_v32", (functionary.OPENER,), body="functionary",
                 open_ended=True, next_opener_ends=True, needs_body=functionary.HEAD),
    # Solar Open 2: one call per block, name then <|tool_arg:…|> pairs; a call whose end token
    # was dropped ends at the next call
    MarkerFormat("solar_open", (solar_open.OPENER,), (solar_open.CLOSER,), body="solar_open",
                 next_opener_ends=True),
    # Inkling: <|message_model|><|content_invoke_tool_json|>{"name", "args"}<|end_message|>
    MarkerFormat("inkling", ("<|content_invoke_tool_json|>",),
                 ("<|end_message|>", "<|content_model_end_sampling|>"), body="json",
                 quotes=_JSON),
    # Muse Glimmer: ATEM invokes
    MarkerFormat("muse_glimmer", (atem.OPENER,), (atem.CLOSER,), body="atem",
                 call_ends=(atem.CALL_END,)),
    # GigaChat 3.5: DSML's invokes with GCML in the tags' prefix
    MarkerFormat("gigachat35", gcml.OPENERS, gcml.CLOSERS, body="gcml", call_ends=gcml.CALL_ENDS),
    # K2 Horizon: <ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>… or {json}
    MarkerFormat("k2_horizon", (ifm.OPENER,), (ifm.CLOSER,), body="ifm",
                 call_ends=("</ifm|tool_call>",)),
    # Nemotron Nano v2: <TOOLCALL>[{"name", "arguments"}]</TOOLCALL>
    MarkerFormat("nemotron", ("<TOOLCALL>",), ("</TOOLCALL>",), body="json", quotes=_JSON),
    # Cohere Command R7B / Command A: [{"tool_call_id", "tool_name", "parameters"}]
    MarkerFormat("cohere", ("<|START_ACTION|>",), ("<|END_ACTION|>",), body="json",
                 quotes=_JSON),
    MarkerFormat("longcat", ("<longcat_tool_call>",), ("</longcat_tool_call>",), body="json"),
    MarkerFormat("apertus", ("<|tools_prefix|>",), ("<|tools_suffix|>",), body="apertus"),
    MarkerFormat("functiongemma", ("<start_function_call>",), ("<end_function_call>",),
                 body="gemma", quotes=("<escape>",)),
    # Gemma 4 ends a call with <tool_call|>; some checkpoints end the turn (<turn|>) instead
    MarkerFormat("gemma4", ("<|tool_call>",), ("<tool_call|>", "<turn|>"), body="gemma",
                 quotes=('<|"|>',)),
    # StepFun Step-3: DeepSeek's token names, but fullwidth bars with ASCII underscores
    MarkerFormat("step3", (f"<{_DS_BAR}tool_calls_begin{_DS_BAR}>",),
                 (f"<{_DS_BAR}tool_calls_end{_DS_BAR}>",), body="step3"),
    MarkerFormat("step3", (f"<{_DS_BAR}tool_call_begin{_DS_BAR}>",),
                 (f"<{_DS_BAR}tool_calls_end{_DS_BAR}>",), body="step3", keep_opener=True),
    # MiniCPM-5 has no wrapper token: each call is one <function name="…">…</function> element
    MarkerFormat("minicpm", ('<function name="', "<function name='"), ("</function>",),
                 body="minicpm", keep_opener=True, needs_body=_TAG_HEAD),
    MarkerFormat("gigachat", ("<|message_sep|>\n\nfunction call<|role_sep|>",
                              "<|message_sep|>\nfunction call<|role_sep|>",
                              "<|message_sep|>function call<|role_sep|>",
                              "function call<|role_sep|>", "<|function_call|>"),
                 body="json", open_ended=True),
)

# Formats read without a table entry, for ``formats=`` and the docs (``functionary``: Functionary
# v3.1 and Llama 3.1's <function=NAME>{json}</function>, opened by Qwen3's ``<function=``).
BUILTIN = ("hermes", "qwen_xml", "glm", "tool_tag", "yaml_tag", "tool_element", "json",
           "pythonic", "functionary")
ALL_FORMATS = tuple(dict.fromkeys(BUILTIN + tuple(f.id for f in MARKER_FORMATS)))
# Formats with answer markers and no calls of their own (``toolcodec.formats.reasoning``):
# ERNIE 4.5's <response>, read only when named; its calls are Hermes'.
ANSWER_FORMATS = ("ernie45",)

# Tokens a server may leave at the very end of a generation; never part of a call's body, and
# kept out of ``content`` when they close the output (``text.end_token_dropped``).
END_OF_GENERATION = ("</s>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|eot|>", "<|end|>",
                     "<|endoftext|>", "<|end_of_text|>", "<|return|>", "<|call|>",
                     f"<{_DS_BAR}end{_DS_SP}of{_DS_SP}sentence{_DS_BAR}>",
                     "<|end▁of▁sentence|>", "<|end_of_sentence|>", "[/TOOL_CALLS]",
                     "<end_of_turn>", "<turn|>", "<|END_OF_TURN_TOKEN|>", "<|observation|>",
                     "<|user|>")


# Marker formats of the families registered at run time (``toolcodec.formats.registry``).
_REGISTERED: list[MarkerFormat] = []


def marker_formats(enabled: frozenset[str] | None) -> tuple[MarkerFormat, ...]:
    """The marker formats in ``enabled`` (all of them for None), registered ones included."""
    return tuple(f for f in (*MARKER_FORMATS, *_REGISTERED) if enabled is None or f.id in enabled)


def format_ids() -> tuple[str, ...]:
    """Every format id ``formats=`` accepts: the built-in ones, then the registered ones."""
    return tuple(dict.fromkeys(ALL_FORMATS + ANSWER_FORMATS + tuple(f.id for f in _REGISTERED)))


def add_markers(markers: tuple[MarkerFormat, ...]) -> None:
    """Read ``markers`` from now on (for ``toolcodec.formats.registry.register``)."""
    _REGISTERED.extend(markers)


def remove_markers(markers: tuple[MarkerFormat, ...]) -> None:
    """Stop reading ``markers`` (``toolcodec.formats.registry.unregister``)."""
    _REGISTERED[:] = [f for f in _REGISTERED if f not in markers]


def strip_end_tokens(body: str) -> str:
    """``body`` without a trailing end-of-generation token (and the blanks around it)."""
    stripped = body.rstrip()
    for token in END_OF_GENERATION:
        if stripped.endswith(token):
            return stripped[:-len(token)].rstrip()
    return body
