"""Entry point: `python -m mock_service [options]`."""

from __future__ import annotations

import sys

from .config import parse_config


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(argv)  # exits 2 on a bad value, before importing aiohttp
    from .server import run

    try:
        run(cfg)
    except KeyboardInterrupt:  # SIGINT arriving before handlers are installed
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
