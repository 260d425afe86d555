"""Where this host's JMeter sends from: the backend's answer for one load run (lab/machines)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClientNetwork:
    """A network of the load generator's own on this host: a command after prefix runs in it (its namespace and
    cgroup), at address, with the socket settings a load generator needs set there only (sysctls)."""
    prefix: tuple[str, ...]
    address: str
    where: str                                  # one sentence for run.json and the report
    sysctls: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"where": self.where, "address": self.address, "sysctls": dict(self.sysctls)}
