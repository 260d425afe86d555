"""python -m lab: the lab's command line (./start.sh runs it; it moves itself into .venv first)."""
import sys

from lab import bootstrap

if not bootstrap.in_venv():
    bootstrap.enter_venv(sys.argv[1:])

from lab.cli import main  # noqa: E402  (only inside the venv: it needs the pinned packages)

sys.exit(main())
