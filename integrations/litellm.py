"""A LiteLLM proxy callback that turns tool-call markup into ``tool_calls``.

In a LiteLLM proxy's ``config.yaml``::

    litellm_settings:
      callbacks: toolcodec.integrations.litellm.handler

LiteLLM passes a model's answer through as it came: a Qwen or DeepSeek model behind an
OpenAI-compatible server that left ``<tool_call>…`` (or broken native ``tool_calls``) in the
message reaches the client undecoded. This callback decodes every chat completion the proxy
returns with the request's own ``tools``, exactly as ``toolcodec serve --upstream`` does: calls
become ``tool_calls`` (repaired, validated), ``finish_reason`` says ``tool_calls``, the text
around them stays ``content``, reasoning goes to ``reasoning_content``; a stream's prose goes
out as it comes and a call once its block has closed and validated. A request without
``tools`` (or with ``tool_choice: "none"``) is left alone.

What could not be decoded stays in the content and is said: in the proxy's log, in an
``x-toolcodec-errors`` response header (whole answers), and in the ``toolcodec`` field of a
stream's last chunk. ``ToolcodecCallback(preset="qwen3")`` reads only one family's formats
(the presets of ``toolcodec serve --preset``); ``handler`` reads every format.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from litellm.integrations.custom_logger import CustomLogger
from litellm.types.utils import ModelResponse, ModelResponseStream
from toolcodec.decoding.codec import ToolCallCodec, codec_for
from toolcodec.decoding.openai_chunks import ChunkWriter
from toolcodec.integrations.options import error_codes, preset_options, tool_dicts
from toolcodec.pool.proxy.message import call_id, openai_message, unrepaired_natives
from toolcodec.schema.tools import InvalidToolsError

logger = logging.getLogger("toolcodec.integrations.litellm")
ERRORS_HEADER = "x-toolcodec-errors"
_ERRORS_KEY = "_toolcodec_errors"  # set on the request's data by the success hook


class ToolcodecCallback(CustomLogger):
    """Decode the tool calls of the proxy's chat completions; see the module docstring.

    :param preset: a family preset (``qwen3``, ``deepseek-v3``, …): read only its formats.
    """

    def __init__(self, preset: str | None = None) -> None:
        super().__init__()
        self.options = preset_options(preset)

    # LiteLLM looks for these hooks on the instance's own class, so each is defined here.

    async def async_post_call_success_hook(self, data: dict, user_api_key_dict: Any,
                                           response: Any) -> Any:
        """A whole answer: each choice's message decoded in place."""
        codec = self._codec(data)
        if codec is None or not isinstance(response, ModelResponse):
            return response
        codes: list[str] = []
        for choice in response.choices:
            message = choice.message
            if not isinstance(message.content, str | None):
                continue  # content parts (not text a model wrote calls in): left as they are
            sent = {"role": "assistant", "content": message.content}
            natives = [call.model_dump() for call in message.tool_calls or []]
            if natives:
                sent["tool_calls"] = natives
            reasoning = getattr(message, "reasoning_content", None)
            if reasoning:
                sent["reasoning_content"] = reasoning
            result = codec.decode(sent, finish_reason=choice.finish_reason).to_dict()
            codes += error_codes(result["errors"])
            decoded = openai_message(result, f"{response.id}:{choice.index}")
            calls = decoded.get("tool_calls", []) + unrepaired_natives(result, natives)
            message.content = decoded["content"]
            message.tool_calls = calls or None
            if decoded.get("reasoning_content"):
                message.reasoning_content = decoded["reasoning_content"]
            choice.finish_reason = _finish_reason(choice.finish_reason, bool(calls))
        if codes:
            data[_ERRORS_KEY] = codes
            _log(codes, data)
        return response

    async def async_post_call_response_headers_hook(
            self, data: dict, user_api_key_dict: Any, response: Any,
            request_headers: dict[str, str] | None = None,
            litellm_call_info: dict[str, Any] | None = None) -> dict[str, str] | None:
        """Name what a whole answer kept as content instead of a call (set by the hook above,
        which LiteLLM runs first)."""
        codes = data.get(_ERRORS_KEY)
        return {ERRORS_HEADER: ",".join(dict.fromkeys(codes))} if codes else None

    async def async_post_call_streaming_iterator_hook(
            self, user_api_key_dict: Any, response: AsyncIterator[Any],
            request_data: dict) -> AsyncGenerator[Any, None]:
        """A stream: every choice through its own stream decoder, chunk by chunk."""
        codec = self._codec(request_data)
        if codec is None:
            async for chunk in response:
                yield chunk
            return
        choices: dict[int, _Choice] = {}
        held: list[Any] = []  # usage-only chunks: after the final chunks, as they came
        head: dict[str, Any] = {}
        async for chunk in response:
            if not isinstance(chunk, ModelResponseStream):
                yield chunk  # not a chat chunk (an error text, say): not ours to change
                continue
            if not head:
                head = {"id": chunk.id, "model": chunk.model, "created": chunk.created}
            if not chunk.choices:
                held.append(chunk)
                continue
            for choice in chunk.choices:
                state = choices.get(choice.index)
                if state is None:
                    state = choices[choice.index] = _Choice(codec, head, choice.index)
                for out in state.feed(choice):
                    yield out
        for index in sorted(choices):
            for out in choices[index].close(request_data):
                yield out
        for chunk in held:
            yield chunk

    def _codec(self, data: dict) -> ToolCallCodec | None:
        tools = tool_dicts(data.get("tools"))
        if not tools or data.get("tool_choice") == "none":
            return None
        try:
            return codec_for(tools, **self.options)
        except InvalidToolsError as exc:
            logger.warning("toolcodec: the request's tools cannot be used, nothing is "
                           "decoded: %s", exc)
            return None


class _Choice:
    """One choice of a stream: its decoder and the chunks it has sent."""

    def __init__(self, codec: ToolCallCodec, head: dict[str, Any], index: int) -> None:
        self.decoder = codec.stream()
        self.head = head
        self.writer = ChunkWriter(id=head["id"], model=head["model"] or "",
                                  created=head["created"], choice=index,
                                  call_id=lambda _event, n: call_id(f"{head['id']}:{index}", n))
        self.finish: str | None = None
        self.codes: list[str] = []

    def feed(self, choice: Any) -> list[ModelResponseStream]:
        delta = choice.delta.model_dump(exclude_none=True) if choice.delta else {}
        delta.pop("role", None)
        if choice.finish_reason:
            self.finish = choice.finish_reason
        return self._chunks(self.decoder.feed({"delta": delta}))

    def close(self, request_data: dict) -> list[ModelResponseStream]:
        out = self._chunks(self.decoder.close(finish_reason=self.finish))
        result = self.decoder.result().to_dict()
        # native calls decoding refused go on as the model sent them, as in a whole answer
        natives = self.decoder.assembled_message().get("tool_calls")
        out += [ModelResponseStream(**self.writer.raw_call(call))
                for call in unrepaired_natives(result, natives)]
        self.codes += [c for c in error_codes(result["errors"]) if c not in self.codes]
        report = {"toolcodec": {"errors": self.codes}}
        # provider_specific_fields also keeps LiteLLM from its fast serializer, which would
        # drop the toolcodec field
        extra = {**report, "provider_specific_fields": report} if self.codes else {}
        if self.codes:
            _log(self.codes, request_data)
        out.append(ModelResponseStream(**self.writer.final(self.finish, **extra)))
        return out

    def _chunks(self, events: list[dict[str, Any]]) -> list[ModelResponseStream]:
        out = []
        for event in events:
            if event["type"] == "error":
                self.codes.append(event["error"]["code"])
            chunk = self.writer.chunk(event)
            if chunk is not None:
                out.append(ModelResponseStream(**chunk))
        return out


def _finish_reason(upstream: str | None, called: bool) -> str | None:
    """``tool_calls`` once there are calls; a cut answer stays ``length``."""
    if upstream == "length":
        return upstream
    if called:
        return "tool_calls"
    return "stop" if upstream == "tool_calls" else upstream


def _log(codes: list[str], data: dict) -> None:
    logger.warning("toolcodec: kept as content, not a call (%s); model %s",
                   ", ".join(dict.fromkeys(codes)), data.get("model", "-"))


handler = ToolcodecCallback()
