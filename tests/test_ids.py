"""Ids that must be unique, not secret (``toolcodec.results.ids``)."""

from __future__ import annotations

import os
import random
import re

import pytest
from toolcodec.results.ids import random_hex


@pytest.mark.parametrize("nbytes", [1, 4, 8, 16])
def test_random_hex_has_the_length_and_alphabet_of_token_hex(nbytes: int) -> None:
    ids = {random_hex(nbytes) for _ in range(200)}
    assert all(re.fullmatch(f"[0-9a-f]{{{2 * nbytes}}}", i) for i in ids)
    if nbytes >= 4:
        assert len(ids) == 200  # leading zeros kept, values spread


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    # Serve processes fork workers and tests fork servers: a child that inherited its
    # parent's generator state would hand out the same request ids and call-id nonces.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, " ".join(random_hex(8) for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    parent = [random_hex(8) for _ in range(4)]
    os.waitpid(pid, 0)
    child = os.read(read, 1024).decode().split()
    os.close(read)
    assert len(child) == 4 and not set(child) & set(parent)


def test_seeding_the_shared_generator_does_not_repeat_ids() -> None:
    # An application may seed random's shared generator in every process it starts (for
    # reproducible sampling); its processes must still hand out different ids.
    state = random.getstate()
    try:
        random.seed(1234)
        first = [random_hex(8) for _ in range(4)]
        random.seed(1234)
        again = [random_hex(8) for _ in range(4)]
    finally:
        random.setstate(state)
    assert not set(first) & set(again)
