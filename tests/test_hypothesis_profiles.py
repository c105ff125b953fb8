"""The suite is deterministic unless asked to explore (docs/testing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
PROBE = ("import tests.conftest as c; from hypothesis import settings as s; d = s.default; "
         "print(c.PROFILE, d.derandomize, d.database is None, d.max_examples)")


def profile_under(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    if env_value is not None:
        env["HYPOTHESIS_PROFILE"] = env_value
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_default_profile_is_derandomized_without_a_database() -> None:
    assert profile_under(None) == "ci True True 100"
    assert profile_under("ci") == "ci True True 100"


def test_the_dev_profile_explores_and_keeps_a_database() -> None:
    assert profile_under("dev") == "dev False False 1000"


SEEN: list[list[int]] = []


@settings(max_examples=20)
@given(st.lists(st.integers()))
def _record(xs: list[int]) -> None:
    SEEN[-1].append(len(xs) * 7919 + sum(xs) % 7919)


def test_two_runs_try_the_same_examples() -> None:
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci":
        return  # exploring on purpose: runs differ
    for _ in range(2):
        SEEN.append([])
        _record()
    assert SEEN[-1] == SEEN[-2] and len(SEEN[-1]) >= 10


def test_the_example_database_is_never_committed() -> None:
    assert ".hypothesis/" in (ROOT / ".gitignore").read_text().split()
    tracked = subprocess.run(["git", "ls-files", ".hypothesis"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    assert tracked == ""
