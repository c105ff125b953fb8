"""Where the peer libraries' test vectors live: ``../shared/peers`` beside the checkout.

``TOOLCODEC_PEERS`` overrides the location. Tests that use them skip with a reason (shown in
pytest's summary) when the folder is absent, e.g. in a clone of the repository alone.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("TOOLCODEC_PEERS", ROOT.parent / "shared" / "peers"))
