"""One regex alternative for a set of literal words, factored by their common prefixes.

``a|ab|abc`` tried at a position costs one attempt per word; ``a(?:b(?:c)?)?`` costs one per
character that matches. The openers' search tries its alternation at every ``<`` or ``[`` of
the text, so a run of them cost a microsecond per character with dozens of marker tokens
and tool names listed flat.
"""

from __future__ import annotations

from collections.abc import Iterable

import regex


def trie_pattern(words: Iterable[str]) -> str:
    """A non-capturing pattern matching exactly *words*, the longest word where several match
    at one position (as a flat alternation sorted longest first does). Empty words are
    ignored; no words give a pattern that never matches."""
    branches = trie_branches(words)
    if not branches:
        return "(?!)"
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


def trie_branches(words: Iterable[str]) -> list[str]:
    """`trie_pattern`'s alternatives, one per first character, each starting with that
    character (an alternation of them is `trie_pattern`): written into a larger alternation
    they keep every branch's first character literal, which the ``re`` engine needs to skip
    along the text to where one may match."""
    root: dict[str, dict] = {}
    for word in words:
        if not word:
            continue
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    # Iterative post-order: a word may be long, and a recursion per character would not do.
    built: dict[int, str] = {}
    stack: list[tuple[dict, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = sorted(k for k in node if k)
        if not expanded:
            stack.append((node, True))
            stack.extend((node[ch], False) for ch in children)
            continue
        alts = [regex.escape(ch) + built.pop(id(node[ch])) for ch in children]
        if node is root:
            return alts
        if not alts:
            built[id(node)] = ""
            continue
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        built[id(node)] = f"(?:{body})?" if "" in node else body
    return []
