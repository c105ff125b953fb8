"""A module a Redis writer may name as a job's callback in tests.

Importing it writes ``imported`` into ``$TOOLCODEC_TEST_MARKER_DIR``; calling
:func:`callback` writes ``called``. An attack test sets the variable in the worker's
environment, plants the name in Redis and asserts that neither file ever appears.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

MARKER_DIR_ENV = "TOOLCODEC_TEST_MARKER_DIR"


def _mark(name: str) -> None:
    where = os.environ.get(MARKER_DIR_ENV)
    if where:
        Path(where, name).write_text(name)


_mark("imported")


def callback(*args: Any, **kwargs: Any) -> None:
    """Any RQ callback signature: success, failure or stopped."""
    _mark("called")
