"""Where things are, in the repository and on the host."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"
ANSIBLE_DIR = REPO / "ansible"
PLAYBOOK = ANSIBLE_DIR / "site.yml"
ENGINES_PLAYBOOK = ANSIBLE_DIR / "engines.yml"   # starts and stops the loadgen group's JMeter engines
INVENTORIES = ANSIBLE_DIR / "inventories"
JAR = REPO / "app" / "target" / "camel-tuning-lab-service.jar"                    # camel_app_stack: classic
MODERN_JAR = REPO / "app" / "modern" / "target" / "camel-tuning-lab-service-modern.jar"   # camel_app_stack: modern
SCENARIOS = REPO / "jmeter" / "scenarios"   # the shipped scenario files: --scenario NAME finds NAME.yaml here
LOGS = REPO / ".cache" / "logs"             # the builds', playbooks' and Vagrant's logs
# The local backend's machines live outside the repository: their processes run as an
# unprivileged user that may not be able to enter a checkout under /root.
LOCAL_ROOT = Path("/var/lib/camel-tuning-lab")


def shown(path: Path) -> str:
    """A path as ./start.sh's own messages give it: from the repository where it lies there, else whole."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def callers(typed: str) -> Path:
    """A path as the user typed it, from the folder they ran ./start.sh in (start.sh moves into the
    repository and says where it came from in LAB_CALLER_DIR)."""
    return Path(os.environ.get("LAB_CALLER_DIR") or os.getcwd()) / Path(typed).expanduser()
