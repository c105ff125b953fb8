"""A vLLM tool parser backed by toolcodec: ``--tool-call-parser toolcodec``.

vLLM loads it through the ``vllm.general_plugins`` entry point that installing toolcodec
declares (``register`` below), or from a file with ``--tool-parser-plugin``. It is registered
as ``toolcodec`` (every format, detected by its markers) and as ``toolcodec-<preset>`` for each
family preset (``toolcodec-qwen3``, ``toolcodec-deepseek-v3``, …: only that family's formats).

vLLM makes one parser per request. A whole answer is decoded by the codec; a stream by one
``StreamDecoder``, fed each delta: prose goes out as soon as it cannot be markup, a call once
its block has closed and validated against the request's tools, and what is still held back
when the generation ends is released by ``finish_streaming`` (vLLM calls it for parsers that
set ``engine_based_streaming``). Text the codec could not turn into a call stays content,
and the reason is logged. A generation that used up ``max_completion_tokens`` (or
``max_tokens``) is decoded as cut (``finish_reason="length"``): an unclosed call is no call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from toolcodec.decoding.codec import ToolCallCodec, codec_for
from toolcodec.integrations.options import (
    error_codes,
    kept_text,
    preset_names,
    preset_options,
    tool_dicts,
)
from toolcodec.schema.tools import InvalidToolsError
from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.logger import init_logger
from vllm.renderers.chat_utils import make_tool_call_id
from vllm.tokenizers import TokenizerLike
from vllm.tool_parsers.abstract_tool_parser import Tool, ToolParser, ToolParserManager

logger = init_logger(__name__)
NAME = "toolcodec"


class ToolcodecToolParser(ToolParser):
    """Tool calls out of any format toolcodec reads, repaired and validated; ``preset``
    (a class attribute, set on the per-preset subclasses) restricts the formats."""

    preset: str | None = None
    # vLLM calls finish_streaming() at the end of a stream only for such parsers; the stream
    # decoder holds back what could still be markup until then.
    engine_based_streaming = True

    def __init__(self, tokenizer: TokenizerLike, tools: list[Tool] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._options = preset_options(self.preset)
        self._stream: Any = None  # the request's StreamDecoder, made by its first delta
        self._passthrough = False  # no tools to decode with: the text goes through
        self._tokens = 0  # output tokens seen by the stream
        self._max_tokens: int | None = None
        self._calls = 0  # calls sent in this stream
        self._request: Any = None  # the streamed request, named in log lines

    # -- vLLM's ToolParser interface --------------------------------------------------------

    def adjust_request(self, request: Any) -> Any:
        """Keep special tokens in the output: many families write their call markers as
        special tokens, which vLLM would otherwise drop before the parser sees them."""
        request = super().adjust_request(request)
        if request.tools and request.tool_choice != "none":
            request.skip_special_tokens = False
        return request

    def extract_tool_calls(self, model_output: str,
                           request: ChatCompletionRequest) -> ExtractedToolCallInformation:
        """The calls of a whole answer; everything else stays content."""
        codec = None if request.tool_choice == "none" else self._codec(request)
        if codec is None:
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[],
                                                content=model_output)
        limit = _max_tokens(request)
        cut = limit is not None and self._count_tokens(model_output) >= limit
        result = codec.decode(model_output, finish_reason="length" if cut else None)
        _log_errors(result.errors, request)
        content = kept_text(model_output, result)
        calls = [ToolCall(id=make_tool_call_id(), type="function",
                          function=FunctionCall(name=call.name,
                                                arguments=_json(call.arguments)))
                 for call in result.calls]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls,
                                            content=content or None)

    def extract_tool_calls_streaming(self, previous_text: str, current_text: str,
                                     delta_text: str, previous_token_ids: Sequence[int],
                                     current_token_ids: Sequence[int],
                                     delta_token_ids: Sequence[int],
                                     request: ChatCompletionRequest) -> DeltaMessage | None:
        """What this delta made certain: prose, reasoning, whole validated calls."""
        self._tokens += len(delta_token_ids)
        if self._stream is None and not self._passthrough:
            self._start(request)
        if self._stream is None:  # no tools, tool_choice "none", or unusable tools
            return DeltaMessage(content=delta_text) if delta_text else None
        return self._delta(self._stream.feed(delta_text))

    def finish_streaming(self) -> DeltaMessage | None:
        """The end of the generation: release what was held back, decode what is open."""
        if self._stream is None:
            return None
        cut = self._max_tokens is not None and self._tokens >= self._max_tokens
        events = self._stream.close(finish_reason="length" if cut else None)
        return self._delta(events)

    # -- helpers ----------------------------------------------------------------------------

    def _codec(self, request: Any) -> ToolCallCodec | None:
        """The codec for the request's tools, or None (no tools, or tools it cannot use:
        then nothing is decoded into a call, and the reason is logged)."""
        tools = tool_dicts(request.tools or self.tools)
        if not tools:
            return None
        try:
            return codec_for(tools, **self._options)
        except InvalidToolsError as exc:
            logger.warning("toolcodec: the request's tools cannot be used, no call is "
                           "decoded: %s", exc)
            return None

    def _start(self, request: Any) -> None:
        codec = None if request.tool_choice == "none" else self._codec(request)
        if codec is None:
            self._passthrough = True
            return
        self._stream = codec.stream()
        self._max_tokens = _max_tokens(request)
        self._request = request

    def _delta(self, events: list[dict[str, Any]]) -> DeltaMessage | None:
        content, reasoning, calls, errors = [], [], [], []
        for event in events:
            kind = event["type"]
            if kind == "content":
                content.append(event["text"])
            elif kind == "reasoning":
                reasoning.append(event["text"])
            elif kind == "tool_call":
                calls.append(DeltaToolCall(
                    index=self._calls, id=make_tool_call_id(), type="function",
                    function=DeltaFunctionCall(name=event["name"],
                                               arguments=_json(event["arguments"]))))
                self._calls += 1
            elif kind == "error":
                errors.append(event["error"])
        if errors:
            _log_errors(errors, self._request)
        if not (content or reasoning or calls):
            return None
        return DeltaMessage(content="".join(content) or None,
                            reasoning="".join(reasoning) or None, tool_calls=calls)

    def _count_tokens(self, text: str) -> int:
        """The output's length in tokens (0 when the tokenizer cannot say: not cut, then)."""
        try:
            return len(self.model_tokenizer.encode(text, add_special_tokens=False))
        except Exception:  # noqa: BLE001 - a tokenizer without encode: cannot tell a cut
            return 0


def _max_tokens(request: Any) -> int | None:
    """The most output tokens the request allows, if it says."""
    limit = getattr(request, "max_completion_tokens", None)
    if limit is None:
        limit = getattr(request, "max_tokens", None)
    return limit if isinstance(limit, int) and limit > 0 else None


def _json(arguments: dict[str, Any]) -> str:
    return orjson.dumps(arguments).decode()


def _log_errors(errors: list[Any], request: Any) -> None:
    """What the codec could not turn into a call is said in the server's log."""
    if errors:
        logger.warning("toolcodec: kept as content, not a call (%s) in request %s",
                       ", ".join(error_codes(errors)),
                       getattr(request, "request_id", None) or "-")


def parser_classes() -> dict[str, type[ToolcodecToolParser]]:
    """``toolcodec`` and one ``toolcodec-<preset>`` class per preset, by name."""
    classes: dict[str, type[ToolcodecToolParser]] = {NAME: ToolcodecToolParser}
    for preset in preset_names():
        name = f"{NAME}-{preset}"
        classes[name] = type(f"ToolcodecToolParser_{preset.replace('-', '_')}",
                             (ToolcodecToolParser,), {"preset": preset,
                                                      "__module__": __name__})
    return classes


def register() -> None:
    """Register every toolcodec parser with vLLM (the ``vllm.general_plugins`` entry point;
    vLLM may call it more than once, which is harmless)."""
    for name, cls in parser_classes().items():
        ToolParserManager.register_module(name=name, module=cls, force=True)


# Imported by ``--tool-parser-plugin toolcodec.integrations.vllm``: the parsers are registered
# on import, as vLLM expects of such a plugin (``vllm_plugin.py`` is the same by file path).
register()
