"""Reasoning and channel markers, one row per family: what opens a model's reasoning, what ends
it, and the framing tokens around its answer. Read by the engine (openers, closers) and by the
codec's ``starts_in_reasoning`` option (which row a generation prompt left open).

A row's ``kind`` says what its body is:

- ``"reasoning"``: the model thinking; it goes to ``reasoning``, and a call written inside it is
  the model thinking about a call, not making it;
- ``"content"``: an answer channel whose text is content as written, even where it looks like
  a call (gpt-oss's ``final`` channel);

``FRAMING`` lists tokens that are structure only (a harmony message header, Kimi K3's response
and message tags): neither content nor calls. Rows and framing of a call format (``harmony``,
``kimi_k3``) are read only when that format is enabled (``formats=``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ReasoningFormat:
    """One family's reasoning (or answer channel) markers.

    ``openers`` are the literal tokens that open the block (the first is the one a generation
    prompt writes); with ``tag``, an opener ``<NAME>`` may also be written with blanks before
    its ``>``. ``closers`` end it; with none found the block runs to the end of the output
    (a reasoning cut off by the length limit is still reasoning). ``calls_end_prefill``: in
    reasoning the prompt opened, one of these call openers on a line of its own, with a body
    after it and no reasoning closer right after its own closer, ends the reasoning (Qwen3.5
    may call without closing its ``<think>``); drafted calls (followed by the closer) stay
    reasoning.
    """

    id: str
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    kind: str = "reasoning"  # "reasoning" | "content"
    tag: bool = False
    # (opener, closer) of calls that end this reasoning when the prompt opened it and the
    # model wrote a call on its own line without closing it first (Qwen3.5)
    calls_end_prefill: tuple[tuple[str, str], ...] = ()
    # the call format this row belongs to: read only when that format is (all rows without)
    format: str = ""
    # its opener is never read in the output: only a prompt opens it (starts_in_reasoning)
    prefill_only: bool = False
    # its markers are ordinary words: read only when ``formats=`` names its format
    explicit: bool = False
    # derived once: the longest closer, the openers of calls_end_prefill, the characters
    # the closers start with
    longest: int = field(init=False, default=0)
    call_openers: tuple[str, ...] = field(init=False, default=())
    closer_firsts: str = field(init=False, default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "longest", max(map(len, self.closers)))
        object.__setattr__(self, "closer_firsts", "".join(sorted({c[0] for c in self.closers})))
        object.__setattr__(self, "call_openers", tuple(o for o, _ in self.calls_end_prefill))


# gpt-oss writes each message as [<|end|>][<|start|>assistant]<|channel|>NAME<|message|>.
_HARMONY_HEADS = tuple(f"{end}{start}<|channel|>" for end in ("", "<|end|>")
                       for start in ("", "<|start|>assistant"))


def _k3_open(name: str) -> str:
    return f"<|open|>{name}<|sep|>"


def _k3_close(name: str) -> str:
    return f"<|close|>{name}<|sep|>"


_HY3_THINK = "<think:opensource>"
_MUSE_ENDS = ("<|eom|>", "<|eot|>")


def _muse(recipient: str) -> tuple[str, ...]:
    """A Muse Glimmer message header to ``recipient``: a new message, or the first one, whose
    ``<|start|>assistant`` the generation prompt wrote."""
    return (f"<|start|>assistant to={recipient}<|message|>", f"to={recipient}<|message|>")


REASONING_FORMATS: tuple[ReasoningFormat, ...] = (
    ReasoningFormat("think", ("<think>",), ("</think>",), tag=True,
                    calls_end_prefill=(("<tool_call>", "</tool_call>"),)),
    ReasoningFormat("seed_oss", ("<seed:think>",), ("</seed:think>",), tag=True),
    # Mistral's tokenizer v13 (Magistral): [THINK]…[/THINK]
    ReasoningFormat("mistral", ("[THINK]",), ("[/THINK]",), format="mistral"),
    ReasoningFormat("harmony", tuple(h + "analysis<|message|>" for h in _HARMONY_HEADS),
                    ("<|end|>",), format="harmony"),
    ReasoningFormat("harmony_final", tuple(h + "final<|message|>" for h in _HARMONY_HEADS),
                    ("<|return|>", "<|end|>"), kind="content", format="harmony"),
    ReasoningFormat("apertus", ("<|inner_prefix|>",), ("<|inner_suffix|>",)),
    ReasoningFormat("gemma4", ("<|channel>thought",), ("<channel|>",)),
    # a model that skips thinking opens its tools section at once: that ends the prefill
    ReasoningFormat("kimi_k3", (_k3_open("think"),), (_k3_close("think"),), format="kimi_k3",
                    calls_end_prefill=((_k3_open("tools"), _k3_close("tools")),)),
    # Cohere Command R7B / Command A: thinking, then the answer (Command A: RESPONSE; R7B: TEXT)
    # Apriel 1.5/1.6 Thinker: the prompt ends with this header; [BEGIN FINAL RESPONSE] ends
    # the reasoning. The header is ordinary words: read only when the caller says the prompt
    # wrote it (starts_in_reasoning="apriel", the apriel preset)
    ReasoningFormat("apriel", ("Here are my reasoning steps:\n",), ("[BEGIN FINAL RESPONSE]",),
                    prefill_only=True),
    ReasoningFormat("solar_open", ("<|think:start|>",), ("<|think:end|>",), format="solar_open"),
    # IBM Granite 3.2 (the template's system prompt asks for these phrases); ordinary words,
    # so read only when formats= names granite (the granite preset)
    ReasoningFormat("granite", ("Here is my thought process:",), ("Here is my response:",),
                    format="granite", explicit=True),
    # Inkling's typed content blocks: thinking, and visible text
    ReasoningFormat("inkling", ("<|content_thinking|>",),
                    ("<|end_message|>", "<|content_model_end_sampling|>"), format="inkling"),
    ReasoningFormat("inkling_text", ("<|content_text|>",),
                    ("<|end_message|>", "<|content_model_end_sampling|>"), kind="content",
                    format="inkling"),
    ReasoningFormat("cohere", ("<|START_THINKING|>",), ("<|END_THINKING|>",), format="cohere"),
    ReasoningFormat("cohere_response", ("<|START_RESPONSE|>", "<|START_TEXT|>"),
                    ("<|END_RESPONSE|>", "<|END_TEXT|>"), kind="content", format="cohere"),
    # Hunyuan Hy3's think tokens carry the checkpoint's suffix; its high-effort generation
    # prompt opens the section (starts_in_reasoning="hunyuan", the hy3-thinking preset)
    ReasoningFormat("hunyuan", (_HY3_THINK,), ("</think:opensource>",), format="tool_calls"),
    # ERNIE 4.5: the answer after </think> is wrapped in <response>…</response>; calls are
    # written beside it. Ordinary words: read only when formats= names ernie45 (its presets)
    ReasoningFormat("ernie45_response", ("<response>",), ("</response>",), kind="content",
                    format="ernie45", explicit=True),
    # Muse Glimmer addresses each message, as harmony does: to=self is its reasoning, to=user
    # its answer (the prompt ends with <|start|>assistant; tool calls: EXPLICIT_FRAMING
    # below). Read only when formats= names muse_glimmer (its preset): its first header is
    # ordinary letters (to=…), which prose is full of, and its full ones extend harmony's.
    ReasoningFormat("muse_glimmer", _muse("self"), _MUSE_ENDS, format="muse_glimmer",
                    explicit=True),
    ReasoningFormat("muse_glimmer_user", _muse("user"), _MUSE_ENDS, kind="content",
                    format="muse_glimmer", explicit=True),
)

# Structure that is neither content nor a call, and the call format it belongs to.
FRAMING: dict[str, str] = {
    **{h + "commentary<|message|>": "harmony" for h in _HARMONY_HEADS},
    # Inkling's message header and end of sampling
    "<|message_model|>": "inkling", "<|content_model_end_sampling|>": "inkling",
    # Apriel's answer markers, written without the prompt's reasoning header too
    "[BEGIN FINAL RESPONSE]": "tool_calls", "[END FINAL RESPONSE]": "tool_calls",
    # Functionary v3.2's text channel header (>>>all then a line break)
    ">>>all\n": "functionary_v32", ">>>all\r\n": "functionary_v32",
    # a think closer whose opener the prompt wrote (without starts_in_reasoning) is a control
    # token too: never content
    **{t: "kimi_k3" for t in (_k3_open("response"), _k3_close("response"),
                              _k3_close("message"), "<|end_of_msg|>", _k3_close("think"))},
    "</think:opensource>": "tool_calls",
    "<|eom|>": "muse_glimmer",  # Muse Glimmer's end of a message
}
# Framing of ordinary words, read only when ``formats=`` names its format: Hunyuan A13B's
# answer wrapper (its calls are written inside it), for formats=["tool_calls"] (the hunyuan
# preset), elsewhere <answer> is text as written; Muse Glimmer's header of a message to its
# tools (its ATEM block follows).
EXPLICIT_FRAMING: dict[str, str] = {"<answer>": "tool_calls", "</answer>": "tool_calls",
                                    **dict.fromkeys(_muse("functions"), "muse_glimmer")}

# Every row by id and by opener, registered families' rows included (``add_rows``).
BY_ID = {f.id: f for f in REASONING_FORMATS}
BY_OPENER = {opener: f for f in REASONING_FORMATS for opener in f.openers}


def add_rows(rows: tuple[ReasoningFormat, ...], framing: dict[str, str]) -> None:
    """Read ``rows`` and ``framing`` tokens from now on (for
    ``toolcodec.formats.registry.register``)."""
    for row in rows:
        BY_ID[row.id] = row
        BY_OPENER.update(dict.fromkeys(row.openers, row))
    FRAMING.update(framing)


def remove_rows(rows: tuple[ReasoningFormat, ...], framing: tuple[str, ...]) -> None:
    """Stop reading ``rows`` and ``framing`` tokens (``toolcodec.formats.registry``)."""
    for row in rows:
        BY_ID.pop(row.id, None)
        for opener in row.openers:
            BY_OPENER.pop(opener, None)
    for token in framing:
        FRAMING.pop(token, None)


def tag_rows() -> dict[str, ReasoningFormat]:
    """The rows whose opener is a tag (``<NAME>``), by the tag's name."""
    return {f.openers[0][1:-1]: f for f in BY_ID.values() if f.tag and not f.prefill_only}


def prefill_opener(option: bool | str) -> str | None:
    """The reasoning opener a generation prompt left open, from ``starts_in_reasoning``:
    ``True`` is ``<think>``; a string is a row's id (``"mistral"``) or one of its openers
    (``"[THINK]"``); ``False`` is none. Raises ``ValueError`` for anything else."""
    if option is False or option is None:
        return None
    if option is True:
        return "<think>"
    if isinstance(option, str):
        if option in BY_OPENER and BY_OPENER[option].kind == "reasoning":
            return option
        row = BY_ID.get(option)
        if row is not None and row.kind == "reasoning":
            return row.openers[0]
    known = sorted(f.id for f in BY_ID.values() if f.kind == "reasoning")
    raise ValueError(f"starts_in_reasoning must be a bool, a reasoning format id ({known}) or "
                     f"one of their openers, not {option!r}")
