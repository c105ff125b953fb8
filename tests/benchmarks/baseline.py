"""Another revision of the codec, importable beside the working one, as a baseline.

``load(ref)`` exports ``codec/`` at the git revision ``ref`` (``git archive``) into a temporary
directory as the package ``toolcodec_baseline`` (its absolute ``toolcodec`` imports renamed),
so a benchmark can time today's code against an older revision in the same process and round.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
NAME = "toolcodec_baseline"
_IMPORT = re.compile(r"\b(from|import) toolcodec\b")
_STRING_MODULE = re.compile(r'"toolcodec\.')  # lazy-import tables: "toolcodec.repair.jsonrepair"


def merge_base(branch: str = "main") -> str:
    """The commit where this branch left ``branch``."""
    return subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", branch],
                          check=True, capture_output=True, text=True).stdout.strip()


def load(ref: str) -> ModuleType:
    """The ``codec/`` package at ``ref``, imported as ``toolcodec_baseline``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "codec"],
                             check=True, capture_output=True).stdout
    target = Path(tempfile.mkdtemp(prefix="toolcodec-baseline-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    package = target / NAME
    (target / "codec").rename(package)
    for path in package.rglob("*.py"):
        source = path.read_text()
        source = _IMPORT.sub(rf"\1 {NAME}", source)
        path.write_text(_STRING_MODULE.sub(f'"{NAME}.', source))
    sys.path.insert(0, str(target))
    return importlib.import_module(NAME)
