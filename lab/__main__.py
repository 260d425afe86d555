"""python -m lab: the lab's command line (./start.sh runs it)."""
import sys

from lab.cli import main

sys.exit(main())
