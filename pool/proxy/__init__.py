"""The OpenAI-compatible repairing proxy: ``toolcodec serve --upstream URL``."""

from toolcodec.pool.proxy.chat import ChatProxy

__all__ = ["ChatProxy"]
