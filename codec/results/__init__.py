"""Results: what the codec answers and the bounds it answers within.

- ``result``: the result types (``DecodeResult``, ``Call``, ...), JSON data by ``to_dict``.
- ``errors``: the stable error codes and ``CodecError``.
- ``limits``: size and depth limits; exceeding one is reported, never raised.
- ``feedback``: a decode result's errors written as a message for the model.
- ``toolresults``: what a tool returned, checked against its output schema.
"""
