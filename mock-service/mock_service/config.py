"""Configuration: command line and environment, parsed and validated.

Deliberately free of aiohttp imports so a bad option fails fast and cheaply.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

LATENCY_FORM = "fixed:MS, uniform:MIN_MS,MAX_MS or lognormal:MEDIAN_MS,SIGMA"
DEFAULT_LATENCY = "lognormal:20,0.5"
DEFAULT_PAYLOAD_BYTES = 5120
MIN_PAYLOAD_BYTES = 512  # room for the JSON envelope plus a record or two
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
MAX_LATENCY_MS = 600_000.0  # 10 minutes; anything longer is surely a typo


@dataclass(frozen=True)
class LatencySpec:
    """A latency distribution; all values are in milliseconds."""

    kind: str  # "fixed" | "uniform" | "lognormal"
    a: float  # fixed: MS; uniform: MIN_MS; lognormal: MEDIAN_MS
    b: float = 0.0  # uniform: MAX_MS; lognormal: SIGMA
    text: str = ""  # the spec as given, for the start-up line

    @property
    def is_zero(self) -> bool:
        """True when no sleep is needed at all (skips even the await)."""
        return self.kind == "fixed" and self.a == 0.0

    def sample_ms(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        # Lognormal parameterised by its median: median = exp(mu).
        return rng.lognormvariate(math.log(self.a), self.b)

    def __str__(self) -> str:
        return self.text or f"{self.kind}:{self.a:g}" + (
            f",{self.b:g}" if self.kind != "fixed" else ""
        )


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def parse_latency(text: str) -> LatencySpec:
    """Parse 'fixed:MS', 'uniform:MIN_MS,MAX_MS' or 'lognormal:MEDIAN_MS,SIGMA'.

    Raises ValueError with a message naming the accepted form.
    """
    bad = ValueError(f"invalid latency {text!r}, expected {LATENCY_FORM}")
    kind, sep, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if not sep:
        raise bad
    try:
        params = [_number(p) for p in rest.split(",")]
    except ValueError:
        raise bad from None
    if kind == "fixed" and len(params) == 1:
        (ms,) = params
        if not 0 <= ms <= MAX_LATENCY_MS:
            raise ValueError(f"invalid latency {text!r}: MS must be 0..{MAX_LATENCY_MS:g}")
        return LatencySpec("fixed", ms, text=text.strip())
    if kind == "uniform" and len(params) == 2:
        lo, hi = params
        if not 0 <= lo <= hi <= MAX_LATENCY_MS:
            raise ValueError(
                f"invalid latency {text!r}: need 0 <= MIN_MS <= MAX_MS <= {MAX_LATENCY_MS:g}"
            )
        return LatencySpec("uniform", lo, hi, text=text.strip())
    if kind == "lognormal" and len(params) == 2:
        median, sigma = params
        if not (0 < median <= MAX_LATENCY_MS and 0 <= sigma <= 5):
            raise ValueError(
                f"invalid latency {text!r}: need 0 < MEDIAN_MS <= {MAX_LATENCY_MS:g} "
                "and 0 <= SIGMA <= 5"
            )
        return LatencySpec("lognormal", median, sigma, text=text.strip())
    raise bad


def parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"invalid port {text!r}, expected an integer 1..65535") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"invalid port {text!r}, expected an integer 1..65535")
    return port


def parse_payload_bytes(text: str) -> int:
    form = f"an integer {MIN_PAYLOAD_BYTES}..{MAX_PAYLOAD_BYTES}"
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"invalid payload size {text!r}, expected {form}") from None
    if not MIN_PAYLOAD_BYTES <= n <= MAX_PAYLOAD_BYTES:
        raise ValueError(f"invalid payload size {text!r}, expected {form}")
    return n


def parse_error_rate(text: str) -> float:
    try:
        rate = _number(text)
    except ValueError:
        raise ValueError(f"invalid error rate {text!r}, expected a number 0.0..1.0") from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"invalid error rate {text!r}, expected a number 0.0..1.0")
    return rate


def parse_error_status(text: str) -> int:
    try:
        status = int(text)
    except ValueError:
        status = -1
    if not 400 <= status <= 599:
        raise ValueError(f"invalid error status {text!r}, expected an HTTP status 400..599")
    return status


def parse_seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"invalid seed {text!r}, expected an integer") from None


def _count(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ValueError(f"invalid {what} {text!r}, expected an integer {low}..{high}")
    return value


def parse_max_concurrency(text: str) -> int:
    return _count(text, "max concurrency", 0, 100_000)


def parse_backlog(text: str) -> int:
    return _count(text, "backlog", 1, 65535)


def parse_host(text: str) -> str:
    if not text.strip():
        raise ValueError("invalid host '', expected a hostname or IP address")
    return text.strip()


@dataclass(frozen=True)
class Option:
    flag: str
    env: str
    parse: object  # Callable[[str], T]
    default: str
    help: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


# One table drives argparse, the environment lookup and the --help text, so
# the three can never disagree.
OPTIONS: tuple[Option, ...] = (
    Option("--host", "MOCK_HOST", parse_host, "127.0.0.1", "address to listen on"),
    Option("--port", "MOCK_PORT", parse_port, "9090", "TCP port to listen on (1..65535)"),
    Option("--payload-bytes", "MOCK_PAYLOAD_BYTES", parse_payload_bytes,
           str(DEFAULT_PAYLOAD_BYTES), "size of the GET /data JSON body in bytes"),
    Option("--latency", "MOCK_LATENCY", parse_latency, DEFAULT_LATENCY,
           f"per-request latency of GET /data: {LATENCY_FORM}"),
    Option("--error-rate", "MOCK_ERROR_RATE", parse_error_rate, "0",
           "fraction of GET /data requests answered with --error-status (0.0..1.0)"),
    Option("--error-status", "MOCK_ERROR_STATUS", parse_error_status, "500",
           "HTTP status of injected errors (400..599)"),
    Option("--seed", "MOCK_SEED", parse_seed, "42",
           "seed for the payload generator and the latency/error RNG"),
    # The 2018 backend was Python's single-threaded http.server: one request at a time, listen backlog 5.
    Option("--max-concurrency", "MOCK_MAX_CONCURRENCY", parse_max_concurrency, "0",
           "GET /data requests served at once, the others wait their turn (0: no limit)"),
    Option("--backlog", "MOCK_BACKLOG", parse_backlog, "1024",
           "the listening socket's accept queue (1..65535)"),
)


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 9090
    payload_bytes: int = DEFAULT_PAYLOAD_BYTES
    latency: LatencySpec = parse_latency(DEFAULT_LATENCY)
    error_rate: float = 0.0
    error_status: int = 500
    seed: int = 42
    max_concurrency: int = 0
    backlog: int = 1024
    access_log: bool = False

    def summary(self) -> str:
        """The one start-up line a supervisor log should show."""
        return (
            f"mock-service listening on http://{self.host}:{self.port} "
            f"payload_bytes={self.payload_bytes} latency={self.latency} "
            f"error_rate={self.error_rate:g} error_status={self.error_status} "
            f"seed={self.seed} max_concurrency={self.max_concurrency or 'none'} "
            f"backlog={self.backlog} access_log={'on' if self.access_log else 'off'}"
        )


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage + message on error; a supervisor log wants one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _argparse_type(opt: Option):
    def convert(text: str):
        try:
            return opt.parse(text)  # type: ignore[operator]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = opt.dest  # shows in argparse's fallback messages
    return convert


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="mock_service",
        description="Mock backend for camel-tuning-lab. Every option can also be "
        "set by its environment variable; the command line wins.",
    )
    for opt in OPTIONS:
        parser.add_argument(
            opt.flag,
            type=_argparse_type(opt),
            default=None,  # None = "not given": fall back to env, then default
            metavar=opt.env.removeprefix("MOCK_"),
            help=f"{opt.help} [env {opt.env}, default {opt.default}]",
        )
    parser.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="log every request to stdout (off by default: it costs throughput) "
        "[env MOCK_ACCESS_LOG=1]",
    )
    return parser


def parse_config(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> Config:
    """Build a Config: command line, then MOCK_* environment, then defaults.

    Exits with status 2 and a one-line message on any bad value.
    """
    environ = os.environ if environ is None else environ
    parser = build_parser()
    ns = parser.parse_args(argv)
    values: dict[str, object] = {}
    for opt in OPTIONS:
        value = getattr(ns, opt.dest)
        if value is None:
            raw = environ.get(opt.env)
            source = f"environment variable {opt.env} (option {opt.flag})"
            if raw is None or raw == "":
                raw, source = opt.default, f"default of {opt.flag}"
            try:
                value = opt.parse(raw)  # type: ignore[operator]
            except ValueError as exc:
                parser.error(f"{source}: {exc}")
        values[opt.dest] = value
    access_log = ns.access_log
    if access_log is None:
        access_log = environ.get("MOCK_ACCESS_LOG", "").strip().lower() in ("1", "true", "yes", "on")
    return Config(access_log=bool(access_log), **values)  # type: ignore[arg-type]


def fail(message: str, status: int = 1) -> NoReturn:
    """Print a one-line error to stderr and exit (no traceback)."""
    print(f"mock_service: error: {message}", file=sys.stderr, flush=True)
    sys.exit(status)
