"""The Redis path works over a real connection: Celery's broker connection as configured from REDIS_URL."""

import kombu


def test_kombu_round_trips_a_message_through_redis(redis_url):
    with kombu.Connection(redis_url, connect_timeout=3) as conn:
        queue = conn.SimpleQueue("kvp-test-roundtrip")
        try:
            queue.put({"hello": "redis"})
            message = queue.get(timeout=3)
            assert message.payload == {"hello": "redis"}
            message.ack()
        finally:
            queue.clear()
            queue.close()


def test_embedded_filesystem_broker_round_trips_a_message(tmp_path):
    folder = tmp_path / "queue"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "control_folder": str(tmp_path / "control")}
    with kombu.Connection("filesystem://", transport_options=options) as conn:
        queue = conn.SimpleQueue("kvp-test-fs")
        queue.put({"hello": "filesystem"})
        message = queue.get(timeout=3)
        assert message.payload == {"hello": "filesystem"}
        message.ack()
        queue.close()
