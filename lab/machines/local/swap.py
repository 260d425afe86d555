"""The lab's own swap file, for a memory model with swap: the host may have none (this kind of host has
none), and the machines' cgroups can only use swap the kernel has. Made at up when the model asks for
swap, removed at down; the swap the host already had is left alone and not counted on."""
from __future__ import annotations

import subprocess
from pathlib import Path

from lab.machines.local.machine import LocalBackendError, _tool
from lab.machines.local.memory import VM_AVAILABLE_MIB, VM_RAM_MIB

SWAPS = Path("/proc/swaps")


def active(swapfile: Path, swaps: Path = SWAPS) -> bool:
    """Whether the kernel swaps to this file now."""
    try:
        lines = swaps.read_text().splitlines()[1:]
    except OSError:
        return False
    return any(line.split()[0] == str(swapfile) for line in lines if line.split())


def ensure(swapfile: Path, mib: int) -> None:
    """A swap file of at least mib MiB, swapped on. Idempotent. LocalBackend.up refuses another size while the
    machines are up (swapoff would have to bring their swapped pages back into memory they may not have)."""
    if active(swapfile) and swapfile.stat().st_size >= mib * 1024 * 1024:
        return
    remove(swapfile)
    swapfile.parent.mkdir(parents=True, exist_ok=True)
    try:
        # dd, not fallocate: swapon refuses files with holes on some filesystems.
        subprocess.run(["dd", "if=/dev/zero", f"of={swapfile}", "bs=1M", f"count={mib}", "status=none"],
                       check=True, capture_output=True, text=True)
        swapfile.chmod(0o600)
        subprocess.run([_tool("mkswap", "util-linux"), str(swapfile)], check=True, capture_output=True, text=True)
        subprocess.run([_tool("swapon", "mount"), str(swapfile)], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as error:
        swapfile.unlink(missing_ok=True)
        raise LocalBackendError(f"the memory model asks for swap, but {' '.join(map(str, error.cmd[:2]))} failed: "
                                f"{(error.stderr or '').strip() or f'exit {error.returncode}'} "
                                f"(./start.sh up --memory whole --swap 0 runs without swap, with the whole {VM_RAM_MIB} "
                                f"MiB: the tuned machine does not fit in the vm model's {VM_AVAILABLE_MIB} MiB without "
                                "swap)") from None


def remove(swapfile: Path) -> None:
    """The lab's swap file swapped off and deleted; nothing when there is none."""
    if active(swapfile):
        result = subprocess.run([_tool("swapoff", "mount"), str(swapfile)], capture_output=True, text=True)
        if result.returncode != 0:
            raise LocalBackendError(f"swapoff {swapfile} failed: {result.stderr.strip()} (the machines' memory "
                                    "may be in it: stop them first)")
    swapfile.unlink(missing_ok=True)
