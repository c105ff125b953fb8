"""``--tool-parser-plugin <path of this file>``: registers toolcodec's vLLM parsers.

vLLM imports a plugin given by path under its file name, so the parser module itself (named
``vllm.py``) cannot be given that way; this file imports it by its package name instead.
"""

import toolcodec.integrations.vllm  # noqa: F401 - registers the parsers on import
