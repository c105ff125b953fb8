"""Named decoder options: a family's preset, and vLLM's ``--tool-call-parser`` names.

A preset is the options a family's chat template calls for: the formats it renders calls in,
and whether its generation prompt opens the reasoning (``starts_in_reasoning``). A vLLM user
can name the parser they already run (``qwen3_coder``, ``llama3_json``, ``kimi_k2``, …): each
maps to the same options.
"""

from __future__ import annotations

from typing import Any

_QWEN3 = {"formats": ["hermes", "qwen_xml"]}
_DEEPSEEK_V3 = {"formats": ["deepseek", "deepseek_dsml"]}
_KIMI_K3 = {"formats": ["kimi_k3"], "starts_in_reasoning": "kimi_k3"}
_HUNYUAN = {"formats": ["tool_calls"]}
_ERNIE45 = {"formats": ["hermes", "ernie45"]}
_MUSE = {"formats": ["muse_glimmer"]}

# Family presets: the formats each family's chat template renders calls in, and whether the
# template opens the reasoning in the prompt (the output then starts inside <think>).
FAMILY_PRESETS: dict[str, dict[str, Any]] = {
    # Qwen3 hybrid and Instruct-2507 write <think> themselves; Qwen3-Coder writes <function=…>
    "qwen3": _QWEN3,
    # Qwen3 Thinking-2507: the template ends the prompt with "<think>\n"
    "qwen3-thinking": {"formats": ["hermes", "qwen_xml"], "starts_in_reasoning": True},
    # DeepSeek-R1 (0528 template): the prompt ends with "<think>\n"
    "deepseek-r1": {"formats": ["deepseek"], "starts_in_reasoning": True},
    # DeepSeek V3/V3.1/V3.2 without thinking (the prompt closes </think> itself)
    "deepseek-v3": _DEEPSEEK_V3,
    # DeepSeek V3.1/V3.2 in thinking mode: the prompt ends with "<think>"
    "deepseek-v3-thinking": {"formats": ["deepseek", "deepseek_dsml"],
                             "starts_in_reasoning": True},
    "glm45": {"formats": ["glm"]},  # GLM-4.5, 4.6, 4.7: <tool_call>NAME<arg_key>…
    "kimi-k2": {"formats": ["kimi_k2"]},
    # Kimi K3: the generation prompt opens its think section
    "kimi-k3": _KIMI_K3,
    "gpt-oss": {"formats": ["harmony"]},
    "mistral": {"formats": ["mistral"]},
    "gemma": {"formats": ["gemma4", "functiongemma"]},
    # Llama 3.1/3.3 JSON (bare or after <|python_tag|>) and custom tools <function=NAME>{…}
    # </function>, 3.2 Python lists, Llama 4 <|python_start|>
    "llama": {"formats": ["llama", "json", "pythonic", "functionary"]},
    "minimax": {"formats": ["minimax"]},
    "minimax-m3": {"formats": ["minimax_m3"]},  # every tag prefixed ]<]minimax[>[
    # Functionary v3.1 (<function=NAME>{…}) and v3.2 (>>>NAME⏎{…})
    "functionary": {"formats": ["functionary", "functionary_v32"]},
    "cohere": {"formats": ["cohere"]},  # Command R7B, Command A
    "nemotron": {"formats": ["nemotron"]},  # Nemotron Nano v2: <TOOLCALL>[…]</TOOLCALL>
    # Hunyuan A13B (JSON, its answer wrapped in <answer>: read when tool_calls is named),
    # HY3 (<tool_sep>), HY4, and their checkpoints' suffixed tokens (<tool_calls:opensource>)
    "hunyuan": _HUNYUAN,
    # Hy3 at high reasoning effort: the prompt ends with <think:opensource>
    "hy3-thinking": {"formats": ["tool_calls"], "starts_in_reasoning": "hunyuan"},
    # ERNIE 4.5: Hermes calls beside the answer's <response>…</response>; the Thinking
    # models' prompt opens <think>
    "ernie-4.5": _ERNIE45,
    "ernie-4.5-thinking": {"formats": ["hermes", "ernie45"], "starts_in_reasoning": True},
    # Muse Glimmer: messages to=self (reasoning), to=user (answer), to=functions (ATEM calls)
    "muse-glimmer": _MUSE,
    "solar-open": {"formats": ["solar_open"]},  # <|tool_call:start|>NAME, <|tool_arg:…|>
    # Granite 3.x: <|tool_call|>[…]; 3.2's "Here is my thought process:" … "Here is my
    # response:" is reasoning (read only when granite is named)
    "granite": {"formats": ["granite"]},
    # Apriel 1.5/1.6 Thinker: the prompt ends with "Here are my reasoning steps:\n"
    "apriel": {"formats": ["tool_calls"], "starts_in_reasoning": "apriel"},
}

# vLLM's --tool-call-parser names, for the formats each parser reads.
VLLM_PARSERS: dict[str, dict[str, Any]] = {
    "hermes": {"formats": ["hermes"]}, "ernie45": _ERNIE45,
    "granite4": {"formats": ["hermes"]},
    "qwen3_coder": _QWEN3, "qwen3_xml": _QWEN3, "mimo": _QWEN3,
    "llama3_json": {"formats": ["llama", "json"]},
    "llama4_json": {"formats": ["llama", "json"]},
    "llama4_pythonic": {"formats": ["llama", "pythonic"]},
    "pythonic": {"formats": ["pythonic"]},
    "phi4_mini_json": {"formats": ["json"]},
    "deepseek_v3": {"formats": ["deepseek"]}, "deepseek_v31": {"formats": ["deepseek"]},
    "deepseek_v32": _DEEPSEEK_V3, "deepseek_v4": _DEEPSEEK_V3,
    "kimi_k2": {"formats": ["kimi_k2"]}, "kimi_k3": _KIMI_K3,
    "glm45": {"formats": ["glm"]}, "glm47": {"formats": ["glm"]},
    "minimax_m2": {"formats": ["minimax"]}, "minimax_m3": {"formats": ["minimax_m3"]},
    "seed_oss": {"formats": ["seed_oss"]},
    "mistral": {"formats": ["mistral"]},
    "openai": {"formats": ["harmony"]},
    "granite": {"formats": ["granite"]}, "granite-20b-fc": {"formats": ["granite_fc"]},
    "internlm": {"formats": ["internlm"]},
    "lfm2": {"formats": ["lfm2"]},
    "longcat": {"formats": ["longcat"]},
    "olmo3": {"formats": ["olmo"]},
    "step3": {"formats": ["step3"]},
    "gigachat3": {"formats": ["gigachat"]},
    "functiongemma": {"formats": ["functiongemma"]}, "gemma4": {"formats": ["gemma4"]},
    "apertus": {"formats": ["apertus"]},
    "minicpm5": {"formats": ["minicpm"]},
    "hunyuan_a13b": _HUNYUAN, "hy_v3": _HUNYUAN, "hy_v4": _HUNYUAN,
    "muse_glimmer": _MUSE,
    "cohere_command3": {"formats": ["cohere"]}, "cohere_command4": {"formats": ["cohere"]},
    "nemotron_nano_v2": {"formats": ["nemotron"]},
    "solar_open2": {"formats": ["solar_open"]},
    "k2_horizon": {"formats": ["k2_horizon"]}, "gigachat35": {"formats": ["gigachat35"]},
    "inkling": {"formats": ["inkling"]},
}

# A family's name wins where both tables have it (they agree: glm45, mistral).
PRESETS: dict[str, dict[str, Any]] = {**VLLM_PARSERS, **FAMILY_PRESETS}
