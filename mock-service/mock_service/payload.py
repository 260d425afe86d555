"""Deterministic JSON payload generation.

The document is built and serialised once at start-up, so serving it costs
only a bytes write per request; a seeded RNG makes it identical run to run,
which keeps benchmark results comparable.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

_SYLLABLES = ("ka", "lo", "mi", "ra", "ven", "tor", "sel", "pa", "dru", "xo", "ni", "bel")
_NOUNS = ("widget", "gadget", "bracket", "valve", "sensor", "cable", "panel", "gear")
_CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY", "SEK")
_STATUSES = ("ACTIVE", "PENDING", "SHIPPED", "CANCELLED")
_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
_SEPARATORS = (",", ":")  # compact: size is what we control, not whitespace


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=_SEPARATORS, ensure_ascii=True)


def _timestamp(rng: random.Random, after: datetime = _EPOCH) -> datetime:
    return after + timedelta(seconds=rng.randrange(0, 365 * 24 * 3600))


def _record(rng: random.Random, rid: int) -> dict[str, object]:
    created = _timestamp(rng)
    updated = _timestamp(rng, created)
    name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()
    return {
        "id": rid,
        "name": f"{name} {rng.choice(_NOUNS)}",
        "sku": f"SKU-{rng.randrange(16**6):06X}-{rng.randrange(1000):03d}",
        "quantity": rng.randint(1, 500),
        "amount": round(rng.uniform(0.5, 9999.99), 2),
        "currency": rng.choice(_CURRENCIES),
        "status": rng.choice(_STATUSES),
        "createdAt": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "updatedAt": updated.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _envelope(seed: int, items: list[dict[str, object]], filler: str) -> dict[str, object]:
    return {
        "source": "mock-service",
        "seed": seed,
        "count": len(items),
        "items": items,
        "filler": filler,
    }


def generate_payload(size: int, seed: int) -> bytes:
    """Return a JSON document of exactly `size` bytes (ASCII), deterministic in `seed`.

    Records are added while they fit; the remainder goes into a `filler`
    string so the size is exact rather than approximate.
    """
    rng = random.Random(seed)
    # Envelope overhead with an empty list/filler and a generously wide count.
    overhead = len(_dumps(_envelope(seed, [], ""))) + 12
    items: list[dict[str, object]] = []
    used = overhead
    while True:
        rec = _record(rng, len(items) + 1)
        cost = len(_dumps(rec)) + (1 if items else 0)  # +1 for the comma
        if used + cost > size:
            break
        items.append(rec)
        used += cost
    base = _dumps(_envelope(seed, items, ""))
    missing = size - len(base)
    if missing < 0:
        raise ValueError(f"payload size {size} is too small for the JSON envelope")
    # Filler text: lowercase "words" from the same RNG, so it stays deterministic.
    letters = "abcdefghijklmnopqrstuvwxyz"
    filler = "".join(" " if i % 8 == 7 else rng.choice(letters) for i in range(missing))
    body = _dumps(_envelope(seed, items, filler)).encode("ascii")
    assert len(body) == size, (len(body), size)
    return body
