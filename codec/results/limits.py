"""Size and depth limits shared by the parsers. Exceeding one is reported, never raised."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one call to the codec will parse.

    ``max_chars`` caps the input length (``payload_too_large``); ``max_depth`` caps how deeply
    arrays and objects may nest (``nesting_too_deep``). Parsers are iterative, so raising
    ``max_depth`` costs memory, not stack; but above ``ENCODABLE_DEPTH`` a value may nest too
    deeply for orjson (255 levels, counting the result and envelope around it) to encode, so
    the workers' ceiling cannot be raised past it.
    """

    max_chars: int = 8_000_000
    max_depth: int = 128


# The deepest max_depth whose values still encode inside a result inside a job envelope.
ENCODABLE_DEPTH = 200


DEFAULT_LIMITS = Limits()
