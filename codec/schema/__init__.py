"""Schema: tool definitions and the checks of a call's arguments against them.

- ``tools``: the tool registry, each schema checked and compiled once.
- ``validation``: a call's arguments: known tool, JSON object, normalised, coerced, valid.
- ``coerce``: schema-guided coercion (only what the schema makes unambiguous).
- ``valid``: one walk for a call that needs no mending; ``fast``: the compiled check of the
  common keywords ("valid for sure" or "don't know"); ``meta``: the same for a schema itself.
- ``refs``: a schema's references resolved once; ``budget``: the bound on the keyword
  evaluations of one validation; ``patterns``: schema regexes in linear time (RE2).
"""
