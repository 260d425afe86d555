"""Mock backend for camel-tuning-lab: a tiny, fast aiohttp service with
configurable latency, payload size and error injection."""

__version__ = "1.0.0"
