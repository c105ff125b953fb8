"""The vLLM environment: vLLM's tool parsers on the CPU, without its CUDA stack.

``python -m tests.envs.vllm_env`` builds it (or finds it cached) and prints its interpreter.
vLLM is installed without its dependencies, then given those it declares except the GPU
stack and the structured-output engines, which its tool parsers never import; torch is the
CPU build pip finds on this machine's disk (``torch==2.13.0``: vLLM 0.33 asks for that
release).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

from tests.envs.cache import Env, ensure, pip, recipe_fingerprint, run

VLLM = "0.33.0"
TORCH = "2.13.0"
# Declared by vLLM, never imported by its tool parsers: the GPU stack (torch comes from the
# CPU build above), kernels and their compilers, video decoders, the structured-output
# engines, model-format readers.
EXCLUDED = {"torch", "torchvision", "torchaudio", "torchcodec", "xformers", "triton", "ray",
            "xgrammar", "outlines", "outlines-core", "lm-format-enforcer", "llguidance", "numba",
            "mistral-common", "compressed-tensors", "depyf", "gguf", "openai-harmony",
            "fastsafetensors", "quack-kernels", "pynvvideocodec", "tilelang",
            "nvtx", "instanttensor", "tokenspeed-mla", "humming-kernels"}
EXCLUDED_PREFIXES = ("nvidia-", "deep-", "flashinfer", "cupy", "opencv")
# What the parser modules import beyond vLLM's filtered requirements (found by trying):
# vllm.parser.abstract_parser, which composes the tool and reasoning parsers, imports
# xgrammar's Grammar types; the engine-based reasoning parsers (qwen3, …) import
# vllm.parser.mistral, hence mistral_common (which needs pycountry for its language codes).
# Those two without their dependencies, which would bring triton and another numpy.
EXTRA_NO_DEPS = ["xgrammar==0.2.8", "mistral_common==1.13.1"]
EXTRA = ["pycountry", "pydantic-extra-types"]


def excluded(requirement: Requirement) -> bool:
    """Whether a ``Requires-Dist`` entry is left out (an extra's, or the GPU stack's)."""
    name = requirement.name.lower().replace("_", "-")
    marker = str(requirement.marker or "")
    return ("extra ==" in marker or name in EXCLUDED
            or name.startswith(EXCLUDED_PREFIXES))


def _requires(python: Path) -> list[str]:
    code = "import importlib.metadata as m, json; print(json.dumps(m.requires('vllm') or []))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _recipe(python: Path) -> None:
    pip(python, f"torch=={TORCH}", step="installing torch (CPU build)")
    pip(python, "--no-deps", f"vllm=={VLLM}", step="installing vllm without dependencies")
    wanted = [r for r in _requires(python) if not excluded(Requirement(r))]
    pip(python, *wanted, *EXTRA, step="installing vLLM's requirements (GPU stack left out)")
    pip(python, "--no-deps", *EXTRA_NO_DEPS, step="installing what vLLM's parsers import")
    run([str(python), "-c", "from vllm.tool_parsers import ToolParserManager\n"
         "from vllm.parser.parser_manager import ParserManager\n"
         "ParserManager.get_reasoning_parser('qwen3')"],
        "importing vLLM's parser managers and its qwen3 reasoning parser")


def vllm_env() -> Env:
    """The cached vLLM environment with this checkout installed in it."""
    return ensure("vllm", VLLM, _recipe,
                  recipe_fingerprint(VLLM, TORCH, sorted(EXCLUDED), EXCLUDED_PREFIXES,
                                     EXTRA_NO_DEPS, EXTRA))


if __name__ == "__main__":
    env = vllm_env()
    print(env.python, f"(built in {env.build_seconds:.0f} s)", file=sys.stdout)
