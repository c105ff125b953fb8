"""toolcodec inside the servers users already run: a vLLM tool parser, a LiteLLM callback.

- ``toolcodec.integrations.vllm``: a vLLM ``ToolParser`` registered as ``toolcodec`` and
  ``toolcodec-<preset>`` (entry point group ``vllm.general_plugins``);
- ``toolcodec.integrations.litellm``: a LiteLLM ``CustomLogger`` for a proxy's ``callbacks:``.

Each module imports its server's package, so import only the one that is installed. What they
share (tool definitions as plain dicts, a preset's decoder options) is in ``options``.
"""
