"""Small HTTP helpers for the tests (stdlib client for sequential calls,
aiohttp's client for parallel ones)."""

from __future__ import annotations

import asyncio
import http.client
import time
from dataclasses import dataclass

import aiohttp


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed: float  # seconds, request sent to body fully read


def get(base_url: str, path: str, timeout: float = 10.0) -> Reply:
    """One GET on a fresh connection."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        return get_on(conn, path)
    finally:
        conn.close()


def get_on(conn: http.client.HTTPConnection, path: str) -> Reply:
    """One GET on an existing (keep-alive) connection."""
    t0 = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    elapsed = time.perf_counter() - t0
    return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body, elapsed)


async def _timed_gets(base_url: str, path: str, n: int, concurrency: int) -> list[Reply]:
    sem = asyncio.Semaphore(concurrency)
    # limit=0: no client-side connection cap, so the server sees real parallelism.
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one() -> Reply:
            async with sem:
                t0 = time.perf_counter()
                async with session.get(base_url + path) as resp:
                    body = await resp.read()
                    return Reply(resp.status, dict(resp.headers), body,
                                 time.perf_counter() - t0)

        return await asyncio.gather(*(one() for _ in range(n)))


def parallel_gets(base_url: str, path: str, n: int, concurrency: int | None = None
                  ) -> list[Reply]:
    """n GETs, at most `concurrency` in flight at once (default: all of them)."""
    return asyncio.run(_timed_gets(base_url, path, n, concurrency or n))


def median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
