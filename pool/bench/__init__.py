"""``toolcodec bench``: capacity at the SLO, measured with open-loop load.

See ``docs/capacity.md``. The modules: ``corpus`` (seeded model outputs, or the user's JSONL),
``targets`` (in-process, process pool, Redis/RQ, HTTP, and a ProcessPoolExecutor baseline),
``load`` (closed-loop ceiling and open-loop Poisson load with intended-send-time latency),
``capacity`` (the SLO search), ``report`` (JSON, CSV, plots, compare) and ``cli``.
"""
