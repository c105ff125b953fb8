"""Scanning: finding things in text without deciding what they mean.

- ``envelopes``: ``<think>`` blocks and tool-call envelopes, with their spans.
- ``openers``: one pattern that finds where a block, reasoning, a framing token or a prose
  candidate starts, compiled from the formats' declarations; ``opener_scan`` is its prefilter
  and the tool-name lookup, ``regex_trie`` factors literal words into one alternative.
- ``jsonscan``: the token scanners the tolerant JSON reader is built on.
- ``xmlscan``: a strict scanner for XML-ish call bodies (repairs are the heuristics' job).
- ``bracket_depth``: how deeply prose nests in brackets, in C-level passes.
"""
