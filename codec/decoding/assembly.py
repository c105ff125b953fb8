"""Where one decode collects its spans, calls, errors and repairs before the result is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from toolcodec.results.errors import CodecError
from toolcodec.results.result import Call, DecodeResult, Span
from toolcodec.scanning.envelopes import Block

# The output ended with end-of-generation tokens (``<|im_end|>``, ``<|eot_id|>``, …) that the
# server left in the text; they are kept out of ``content``.
END_TOKEN_DROPPED = "text.end_token_dropped"
_START = attrgetter("start")


@dataclass(slots=True)
class Assembly:
    """Collects spans, calls and errors for one text, then builds the ``DecodeResult``."""

    text: str
    spans: list[Span] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    def add_reasoning(self, block: Block) -> None:
        self.spans.append(Span("reasoning", block.start, block.end))
        self.reasoning.append(self.text[block.body_start:block.body_end].strip())

    def add_calls(self, start: int, end: int, calls: list[Call]) -> None:
        self.spans.append(Span("call", start, end))
        for call in calls:
            call.span = (start, end)
            self.calls.append(call)
            self.repairs.extend(call.repairs)

    def add_markup(self, block: Block, errors: list[CodecError]) -> None:
        self.spans.append(Span("markup", block.start, block.end))
        self.errors.extend(errors)

    def add_end_tokens(self, start: int, end: int) -> None:
        """End-of-generation tokens that close the output: neither content nor a call."""
        self.spans.append(Span("end", start, end))
        self.repairs.append(END_TOKEN_DROPPED)

    def add_tokens(self, start: int, end: int) -> None:
        """A format's framing that holds neither content nor a call (a harmony header)."""
        self.spans.append(Span("tokens", start, end))

    def free_regions(self) -> list[tuple[int, int]]:
        """The gaps between recorded spans (the future ``text`` spans)."""
        taken = sorted((s.start, s.end) for s in self.spans)
        regions, pos = [], 0
        for start, end in taken:
            if start > pos:
                regions.append((pos, start))
            pos = max(pos, end)
        if pos < len(self.text):
            regions.append((pos, len(self.text)))
        return regions

    def finish(self, path: str) -> DecodeResult:
        if not self.spans:  # prose alone: one text span, the whole text
            content = self.text
            if content:
                self.spans.append(Span("text", 0, len(content)))
        else:
            for start, end in self.free_regions():
                self.spans.append(Span("text", start, end))
            self.spans.sort(key=_START)
            content = "".join(self.text[s.start:s.end] for s in self.spans
                              if s.kind in ("text", "markup"))
        reasoning = "\n\n".join(p for p in self.reasoning if p) if self.reasoning else None
        return DecodeResult(ok=not self.errors, path=path if self.calls or path == "xml"
                            else "none", calls=self.calls, content=content.strip(),
                            reasoning=reasoning, repairs=self.repairs, errors=self.errors,
                            spans=self.spans)
