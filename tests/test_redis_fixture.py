"""The Redis test fixture itself: a real server that can be stopped and restarted."""

from __future__ import annotations

import pytest
import redis
from toolcodec.worker.rq_protocol import workers_key

from tests.redis_server import INSTALL_HINT, RedisBinaryMissing, RedisServer, find_redis_server

pytestmark = pytest.mark.redis


def test_session_server_answers_ping(redis_server: RedisServer) -> None:
    client = redis_server.client()
    assert client.ping()
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    info = client.config_get("save")
    assert info["save"] == ""  # no persistence: a restart loses everything, as tests expect
    client.close()


def test_stop_and_start_keep_the_port_and_lose_the_data(own_redis_server: RedisServer) -> None:
    client = own_redis_server.client(socket_connect_timeout=0.2)
    client.set("k", "v")
    port = own_redis_server.port
    own_redis_server.stop()
    with pytest.raises(redis.exceptions.ConnectionError):
        client.ping()
    own_redis_server.start()
    assert own_redis_server.port == port
    assert client.ping()
    assert client.get("k") is None
    client.close()


def test_password_server_url_carries_the_password() -> None:
    server = RedisServer(extra_args=("--requirepass", "s3cret"))
    server.start()
    try:
        assert ":s3cret@" in server.url
        assert server.client().ping()
        bare = redis.Redis.from_url(f"redis://127.0.0.1:{server.port}/0")
        with pytest.raises(redis.exceptions.AuthenticationError):
            bare.ping()
        bare.close()
    finally:
        server.close()


def test_missing_binary_is_reported_with_install_instructions(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REDIS_SERVER", str(tmp_path / "no-such-redis-server"))
    with pytest.raises(RedisBinaryMissing) as info:
        find_redis_server()
    assert str(info.value) == INSTALL_HINT
    assert "apt-get install" in INSTALL_HINT


def test_worker_fixture_registers_its_lanes(start_rq_worker, redis_server, queue_name) -> None:
    group = start_rq_worker(concurrency=2)
    assert group.proc is not None and group.proc.poll() is None
    client = redis_server.client()
    assert client.scard(workers_key(queue_name)) == 2
    group.stop()
    assert client.scard(workers_key(queue_name)) == 0  # a clean stop unregisters
    client.close()
