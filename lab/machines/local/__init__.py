"""The embedded local backend: each machine a network namespace, a cgroup and its own supervisord on
this host (machine.py: what a machine is; cgroups.py, network.py, lifecycle.py: making and removing
it; loadgen.py: the load generator's namespace and its JMeter engine; backend.py: the Backend the rest of
the lab uses)."""
from lab.machines.local.cgroups import Cgroup, CgroupLayout, detect_cgroups
from lab.machines.local.lifecycle import down, memory_events, reset_memory_peak, status, supervisorctl, up
from lab.machines.local.machine import LocalBackendError, Machine, machines
from lab.machines.local.network import run_in

__all__ = ["Cgroup", "CgroupLayout", "LocalBackendError", "Machine", "detect_cgroups", "down", "machines",
           "memory_events", "reset_memory_peak", "run_in", "status", "supervisorctl", "up"]
