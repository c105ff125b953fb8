"""The LiteLLM environment: ``litellm[proxy]``, its proxy server included.

``python -m tests.envs.litellm_env`` builds it (or finds it cached) and prints its
interpreter. LiteLLM pins many packages of its own (fastapi, pydantic, openai…), so it gets a
virtualenv of its own rather than sharing the suite's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.envs.cache import Env, ensure, pip, recipe_fingerprint, run

# Newer releases pin litellm-proxy-extras and litellm-enterprise builds PyPI does not serve here.
LITELLM = "1.106.12"


def _recipe(python: Path) -> None:
    pip(python, f"litellm[proxy]=={LITELLM}", step="installing litellm[proxy]")
    run([str(python), "-c", "import litellm.proxy.proxy_server"],
        "importing LiteLLM's proxy server")


def litellm_env() -> Env:
    """The cached LiteLLM environment with this checkout installed in it."""
    return ensure("litellm", LITELLM, _recipe, recipe_fingerprint(LITELLM))


if __name__ == "__main__":
    env = litellm_env()
    print(env.python, f"(built in {env.build_seconds:.0f} s)", file=sys.stdout)
