"""Decoding: from a model's output (text, a message, a stream) to a result.

- ``codec``: ``ToolCallCodec``, the ordered gate (native calls, then markup, then JSON in
  prose); ``decode`` and ``validate`` for one-off use.
- ``engine``: the one left-to-right pass shared by ``decode`` and the stream, with its
  readers of prose (``prose_reader``) and of reasoning (``reasoning_reader``); the families
  it reads are declared in ``toolcodec.formats``.
- ``valid_path``: the short way for a valid answer (prose and strict Hermes calls that
  validate), with the engine's answer, taken before the engine.
- ``blocks``: one block's body read into checked calls (the format's reader, then the tool
  set's schemas; the built-in formats' choice of reader is ``toolcodec.formats.builtin``).
- ``assembly``: where one decode collects spans, calls and errors before the result.
- ``stream``: ``StreamDecoder``; ``openai_chunks`` turns its events into OpenAI chunks.
- ``native``: an OpenAI-style assistant message taken apart.
- ``textjson``: the call shapes of JSON values.
- ``unread_markup``: call markup the decoder did not read, found in the content.
"""
