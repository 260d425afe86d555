"""Payload size, shape and determinism of GET /data."""

from __future__ import annotations

import json

import pytest

from mock_service.payload import generate_payload

from .helpers import get

RECORD_KEYS = {"id", "name", "sku", "quantity", "amount", "currency", "status",
               "createdAt", "updatedAt"}


def test_default_payload_is_about_5kb_json(fast_mock) -> None:
    reply = get(fast_mock.base_url, "/data")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    assert abs(len(reply.body) - 5120) <= 5120 * 0.05
    assert int(reply.headers["content-length"]) == len(reply.body)
    doc = json.loads(reply.body)
    assert doc["count"] == len(doc["items"]) >= 10
    for item in doc["items"]:
        assert set(item) == RECORD_KEYS
    ids = [item["id"] for item in doc["items"]]
    assert ids == list(range(1, len(ids) + 1))


def test_same_server_serves_same_bytes(fast_mock) -> None:
    assert get(fast_mock.base_url, "/data").body == get(fast_mock.base_url, "/data").body


def test_payload_bytes_option(start_mock) -> None:
    server = start_mock("--latency", "fixed:0", "--payload-bytes", "20000")
    body = get(server.base_url, "/data").body
    assert abs(len(body) - 20000) <= 20000 * 0.05
    assert len(json.loads(body)["items"]) > 50


def test_deterministic_for_same_seed(start_mock) -> None:
    a = start_mock("--latency", "fixed:0", "--seed", "7")
    b = start_mock("--latency", "fixed:0", "--seed", "7")
    c = start_mock("--latency", "fixed:0", "--seed", "8")
    body_a = get(a.base_url, "/data").body
    assert body_a == get(b.base_url, "/data").body
    assert body_a != get(c.base_url, "/data").body


@pytest.mark.parametrize("size", [512, 1000, 5120, 20000, 123457])
def test_generator_exact_size_and_valid(size: int) -> None:
    body = generate_payload(size, seed=1)
    assert len(body) == size
    json.loads(body)
