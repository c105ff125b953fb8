"""A function a foreign RQ job may name in tests: if a worker ever calls it, a file appears."""

from __future__ import annotations

from pathlib import Path


def touch(path: str) -> str:
    Path(path).write_text("called")
    return "called"
