"""Repair: tolerant reading of one payload, every change named by a repair id.

- ``jsonrepair``: JSON a model got wrong, read with provenance; ``json_rewrite`` is its fast
  path for the common damage.
- ``heuristics``: the three-phase pipeline around one parse; ``xml_heuristics`` the default
  heuristics for XML calls, which ``xmlcall`` runs to read one XML call.
- ``normalize``: Unicode clean-up of decoded payloads (bidi controls, compatibility forms).
"""
