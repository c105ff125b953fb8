"""The HTTP service, ``toolcodec serve``: the pool over HTTP, and the proxy's routes beside it."""
