"""The aiohttp application and its lifecycle (bind, serve, stop on signal)."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import random
import signal
import sys

from aiohttp import web

from .config import Config, fail
from .payload import generate_payload

JSON = "application/json"


def build_app(cfg: Config) -> web.Application:
    """Build the app; everything that can be precomputed is precomputed here."""
    payload = generate_payload(cfg.payload_bytes, cfg.seed)
    error_body = json.dumps(
        {"error": "injected failure", "status": cfg.error_status}
    ).encode()
    health_body = b'{"status":"UP"}'
    latency = cfg.latency
    no_sleep = latency.is_zero
    error_rate = cfg.error_rate
    error_status = cfg.error_status
    # One RNG for latency and error decisions; the loop is single-threaded so
    # sharing it is safe, and seeding it makes a run reproducible.
    rng = random.Random(cfg.seed)

    async def answer() -> web.Response:
        if not no_sleep:
            await asyncio.sleep(latency.sample_ms(rng) / 1000.0)
        if error_rate and rng.random() < error_rate:
            return web.Response(status=error_status, body=error_body, content_type=JSON)
        return web.Response(body=payload, content_type=JSON)

    # At most max_concurrency requests answered at a time (its latency included), as a thread pool or a
    # single-threaded server would; the others wait in arrival order.
    turns = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None

    async def data(request: web.Request) -> web.Response:
        if turns is None:
            return await answer()
        async with turns:
            return await answer()

    async def health(request: web.Request) -> web.Response:
        return web.Response(body=health_body, content_type=JSON)

    app = web.Application()
    app.router.add_get("/data", data)
    app.router.add_get("/health", health)
    return app


async def serve(cfg: Config) -> None:
    app = build_app(cfg)
    runner = web.AppRunner(
        app,
        # access_log=None disables aiohttp's access logger entirely (cheaper
        # than a logger that filters each line out).
        access_log=logging.getLogger("aiohttp.access") if cfg.access_log else None,
        handle_signals=False,  # we install our own handlers below
    )
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, backlog=cfg.backlog)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        if exc.errno == errno.EADDRINUSE:
            fail(f"cannot listen on {cfg.host}:{cfg.port}: address already in use")
        fail(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}")

    print(cfg.summary(), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        # Stop accepting, let in-flight requests finish (briefly), close.
        await runner.cleanup()


def run(cfg: Config) -> None:
    if cfg.access_log:
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    try:
        import uvloop  # optional: a faster event loop when installed

        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve(cfg))
