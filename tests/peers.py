"""Where the peer libraries' test vectors live: ``tests/data/peers`` (see its README).

``TOOLCODEC_PEERS`` points the tests and reports at another folder. The files are part of the
repository, so a missing one is an error, never a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("TOOLCODEC_PEERS", ROOT / "tests" / "data" / "peers"))


def peer_file(name: str) -> Path:
    """The path of one vector file; raises if it is missing, so no test passes by skipping."""
    path = PEERS / name
    if not path.is_file():
        raise FileNotFoundError(f"peer vectors {path} missing (TOOLCODEC_PEERS={PEERS})")
    return path
