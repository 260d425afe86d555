#!/usr/bin/env bash
# camel-tuning-lab: ./start.sh [up|run|capacity|ablate|compare|status|down|jmeter] [--backend local|vagrant|ssh] ...   (./start.sh --help)
# Orchestration only: the lab/ Python package does the work, in the project's venv (it installs
# what is missing first, then runs itself there).
set -euo pipefail
export LAB_CALLER_DIR="$PWD"   # relative paths the user typed (--inventory) are theirs, not the repo's
cd "$(dirname "$0")"
command -v python3 >/dev/null || { echo "start.sh: python3 not found (apt-get install python3)" >&2; exit 1; }
exec python3 -m lab "$@"
