"""Shared pytest fixtures. Redis fixtures live in tests/redis_server.py."""
