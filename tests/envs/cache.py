"""Heavy third-party environments (vLLM, LiteLLM) for the integration tests, built once.

Each is a separate virtualenv, cached by name and version outside the clone
(``$TOOLCODEC_ENV_CACHE``, default ``~/.cache/toolcodec/envs/<name>-<version>``), because it
takes minutes to build and its packages must not leak into the suite's own environment. A
build that finishes writes ``built.json`` (the recipe's fingerprint and how long it took); a
folder without it, or with another fingerprint, is built again from scratch. The clone under
test is installed into the environment in editable mode each time it is asked for, so the
environment always runs this checkout's code (cheap: no dependencies, no build isolation).

A build that fails raises ``EnvBuildError`` with pip's own words; the tests turn it into a
failure, never a skip.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
_TAIL = 4000  # characters of a failed command's output kept in the error


class EnvBuildError(RuntimeError):
    """A heavy environment could not be built; the message says which step and why."""


@dataclass(frozen=True)
class Env:
    """A built environment: its folder, its interpreter and what its build cost."""

    path: Path
    python: Path
    build_seconds: float


def cache_root() -> Path:
    """Where the environments live: ``$TOOLCODEC_ENV_CACHE`` or ``~/.cache/toolcodec/envs``."""
    given = os.environ.get("TOOLCODEC_ENV_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "toolcodec" / "envs"


def run(cmd: list[str], step: str, *, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> str:
    """Run *cmd*; its combined output, or an ``EnvBuildError`` naming *step*."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise EnvBuildError(f"{step} failed (exit {done.returncode}): {' '.join(cmd)}\n"
                            f"{out[-_TAIL:]}")
    return out


def pip(python: Path, *args: str, step: str) -> str:
    """``python -m pip install ARGS`` quietly, without pip's version check."""
    return run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                *args], step)


def ensure(name: str, version: str, recipe: Callable[[Path], None], fingerprint: str) -> Env:
    """The environment *name*-*version*, built by *recipe* (given the venv's python) unless
    a complete build with the same *fingerprint* is cached; this clone installed into it."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}-{version}"
    python = path / "bin" / "python"
    stamp = path / "built.json"
    # One build at a time per environment, even from two test runs at once.
    with open(root / f".{name}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = _read_stamp(stamp)
        fingerprint = recipe_fingerprint(fingerprint, project_dependencies())
        if built is None or built.get("fingerprint") != fingerprint:
            shutil.rmtree(path, ignore_errors=True)
            started = time.monotonic()
            run([sys.executable, "-m", "venv", str(path)], f"creating the {name} venv")
            pip(python, "setuptools>=68", "wheel", step="installing setuptools")  # -e builds
            recipe(python)
            pip(python, *project_dependencies(), step=f"installing toolcodec's dependencies "
                f"into the {name} venv")
            built = {"fingerprint": fingerprint,
                     "build_seconds": round(time.monotonic() - started, 1),
                     "python": sys.version.split()[0]}
            stamp.write_text(json.dumps(built, indent=1) + "\n")
        _install_this_clone(python, name)
    return Env(path=path, python=python, build_seconds=float(built["build_seconds"]))


def recipe_fingerprint(*parts: object) -> str:
    """A short hash of what defines a recipe: change any part and the env is rebuilt."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def project_dependencies() -> list[str]:
    """toolcodec's own runtime requirements, from this checkout's pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def _read_stamp(stamp: Path) -> dict | None:
    try:
        return json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None


def _install_this_clone(python: Path, name: str) -> None:
    """This checkout, editable, unless it is installed already with this pyproject.toml (its
    entry points are the installed metadata, so a changed file is installed again)."""
    mark = python.parent.parent / "toolcodec-clone.json"
    want = {"root": str(ROOT),
            "pyproject": hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()}
    if _read_stamp(mark) == want:
        return
    pip(python, "--no-deps", "--no-build-isolation", "-e", str(ROOT),
        step=f"installing this checkout into the {name} venv")
    mark.write_text(json.dumps(want) + "\n")
