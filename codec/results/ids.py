"""Ids that must be unique, not secret: request ids, the nonce of a request's call ids, a
stream decoder's id prefix.

They come from the process's pseudo-random generator (``random``, seeded from the operating
system at start and again in each forked child), not from ``os.urandom``: each of those is a
``getrandom`` system call, and on virtual machines where system calls are dear it was among
the largest single costs of a proxied answer (about 7 µs of about 150 in the serving process).
Nothing is protected by these ids; a client that can guess one learns nothing it was not sent.
"""

from __future__ import annotations

import random

_bits = random.getrandbits  # the module's generator: reseeded after fork (``random``)


def random_hex(nbytes: int) -> str:
    """``2 * nbytes`` lower-case hex digits, as ``secrets.token_hex(nbytes)`` gives."""
    return f"{_bits(nbytes * 8):0{nbytes * 2}x}"
