"""Ids that must be unique, not secret: request ids, the nonce of a request's call ids, a
stream decoder's id prefix.

They come from a pseudo-random generator of this module's own, seeded from the operating
system at import and again in each forked child, not from ``os.urandom``: each of those is a
``getrandom`` system call, and on virtual machines where system calls are dear it was among
the largest single costs of a proxied answer (about 7 µs of about 150 in the serving process).
The generator is not ``random``'s shared one, so an application that seeds that one (for
reproducible sampling, say) does not make its processes hand out the same ids. Nothing is
protected by these ids; a client that can guess one learns nothing it was not sent.
"""

from __future__ import annotations

import os
import random

_generator = random.Random()  # seeded from the operating system
if hasattr(os, "register_at_fork"):  # a child must not repeat its parent's ids
    os.register_at_fork(after_in_child=_generator.seed)
_bits = _generator.getrandbits


def random_hex(nbytes: int) -> str:
    """``2 * nbytes`` lower-case hex digits, as ``secrets.token_hex(nbytes)`` gives."""
    return f"{_bits(nbytes * 8):0{nbytes * 2}x}"
