#!/usr/bin/env bash
# camel-tuning-lab: ./start.sh [up|status|down] [--backend local|vagrant|ssh] ...   (./start.sh --help)
# Orchestration only; the logic lives in the lab/ Python package, which needs nothing but python3.
set -euo pipefail
cd "$(dirname "$0")"
command -v python3 >/dev/null || { echo "start.sh: python3 not found (apt-get install python3)" >&2; exit 1; }
exec python3 -m lab "$@"
