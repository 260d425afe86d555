"""The embedded local backend, for real: network namespaces, veth, cgroups and supervisord on this host.

Machines here use prefix "ctlt", names t1..t3 and indices 201..203 (10.213.201.0/30 ...), so they
cannot collide with the lab's own ("ctlab-default", "ctlab-tuned"); every machine made is brought
down at teardown, whatever the test did. Needs root: without it these tests fail with the
backend's own "needs root" error rather than skip, so a run as non-root never looks green.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from conftest import http_get, wait_for  # noqa: E402
from lab import placement  # noqa: E402
from lab.machines import local  # noqa: E402
from lab.machines.local import LocalBackendError, Machine, lifecycle, loadgen, network, swap  # noqa: E402
from lab.machines.local import machine as local_machine  # noqa: E402

PREFIX = "ctlt"
SYSTEM_PYTHON = "/usr/bin/python3"  # readable by unprivileged users, unlike a venv under /root
MiB = 1024 * 1024


def proc_cgroups(pid: int) -> dict[str, str]:
    """controller -> cgroup path, from /proc/<pid>/cgroup (v2's line under the key '')."""
    paths = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def assert_inside(m: Machine, pid: int) -> None:
    """pid is in the machine's cgroup (memory and cpu) and network namespace."""
    cgroups = proc_cgroups(pid)
    wanted = f"/{m.prefix}/{m.name}"
    if local.detect_cgroups().version == 2:
        assert cgroups[""] == wanted, cgroups
    else:
        assert cgroups["memory"] == wanted and cgroups["cpu"] == wanted, cgroups
    assert os.readlink(f"/proc/{pid}/ns/net") == f"net:[{m.netns_path.stat().st_ino}]"
    assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")


def uid_of(pid: int) -> int:
    line = next(row for row in Path(f"/proc/{pid}/status").read_text().splitlines() if row.startswith("Uid:"))
    return int(line.split()[1])


def program_pid(m: Machine, program: str) -> int:
    result = local.supervisorctl(m, "pid", program)
    assert result.stdout.strip().isdigit(), result
    return int(result.stdout.strip())


def add_program(m: Machine, name: str, command: str, **options: str) -> None:
    settings = {"command": command, "user": "nobody", "directory": "/", "autorestart": "false",
                "startsecs": "1", "redirect_stderr": "true",
                "stdout_logfile": str(m.log_dir / f"{name}.log"), **options}
    body = "".join(f"{key}={value}\n" for key, value in settings.items())
    (m.supervisor_include_dir / f"{name}.conf").write_text(f"[program:{name}]\n{body}")
    result = local.supervisorctl(m, "update")
    assert result.returncode == 0, result


def program_state(m: Machine, name: str) -> str | None:
    return local.status(m)["programs"].get(name)


@pytest.fixture
def make_machine(tmp_path: Path) -> Iterator[Callable[..., Machine]]:
    made: list[Machine] = []

    def make(name: str = "t1", index: int = 201, **kwargs) -> Machine:
        m = Machine(name, index, tmp_path / "machines" / name, prefix=PREFIX, **kwargs)
        local.down(m)  # leftovers of an interrupted earlier run (same names), if any
        made.append(m)
        return m
    yield make
    errors = []
    for m in reversed(made):
        try:
            local.down(m)
        except Exception as error:  # noqa: BLE001 - tear every machine down, then report
            errors.append(error)
    assert not errors, errors


# ------------------------------------------------------------------------------------ real machines

@pytest.mark.lab
def test_host_reaches_a_program_run_unprivileged_inside_the_machine(make_machine) -> None:
    m = make_machine()
    local.up(m)
    st = local.status(m)
    assert st["netns"] and st["supervisord"]["running"] and st["address"] == "10.213.201.2"
    inside = local.run_in(m, ["ip", "-4", "-o", "addr", "show", "dev", "eth0"], capture_output=True, text=True)
    assert "10.213.201.2/30" in inside.stdout, inside
    host = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", m.veth], capture_output=True, text=True)
    assert "10.213.201.1/30" in host.stdout, host

    supervisord = st["supervisord"]["pid"]
    assert_inside(m, supervisord)
    assert os.getsid(supervisord) != os.getsid(0) and os.getpgid(supervisord) != os.getpgid(0)

    add_program(m, "web", f"{SYSTEM_PYTHON} -m http.server 8000 --bind {m.address} --directory /")
    wait_for(lambda: program_state(m, "web") == "RUNNING", what="RUNNING web")

    def answers() -> bool:
        try:
            return http_get(f"http://{m.address}:8000/", timeout=3)[0] == 200
        except OSError:
            return False
    wait_for(answers, what=f"HTTP 200 from {m.address}:8000")
    web = program_pid(m, "web")
    assert_inside(m, web)
    assert uid_of(web) == 65534  # nobody
    assert local.status(m)["programs"] == {"web": "RUNNING"}


@pytest.mark.lab
def test_unprivileged_user_binds_port_80_inside_only(make_machine) -> None:
    host_value = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text()
    m = make_machine()
    local.up(m)
    bind = ("import os, socket; s = socket.socket(); "
            f"s.bind(('{m.address}', 80)); s.listen(); print(os.getuid(), s.getsockname()[1])")
    result = local.run_in(m, [SYSTEM_PYTHON, "-c", bind], user="nobody", capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["65534", "80"]
    assert Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text() == host_value  # per netns


@pytest.mark.lab
def test_memory_limit_is_enforced_and_reported(make_machine) -> None:
    m = make_machine("t2", 202, memory_mb=64)
    local.up(m)
    st = local.status(m)
    assert st["cgroup"]["memory_limit_bytes"] == 64 * MiB
    assert st["cgroup"]["cpu_quota"] == 2.0
    if st["cgroup"]["version"] == 1:
        memory = Path(next(p for p in st["cgroup"]["paths"] if "memory" in p))
        if (memory / "memory.memsw.limit_in_bytes").exists():
            assert int((memory / "memory.memsw.limit_in_bytes").read_text()) == 64 * MiB  # no swap
        assert (memory / "memory.swappiness").read_text().strip() == "0"

    def allocate(mb: int) -> subprocess.CompletedProcess:
        code = f"b = b'x' * ({mb} * 1024 * 1024); print(len(b))"
        return local.run_in(m, [SYSTEM_PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    small = allocate(20)
    assert small.returncode == 0 and small.stdout.strip() == str(20 * MiB), small
    big = allocate(200)
    assert big.returncode == -signal.SIGKILL, big  # the OOM killer, not a MemoryError
    assert local.status(m)["supervisord"]["running"]


def test_a_memory_model_with_swap_lets_the_machine_swap_up_to_its_share_of_the_labs_swap_file(
        make_machine, tmp_path: Path) -> None:
    # The kernel's swap is the lab's own file; the cgroup may use swap_mb of it, no more.
    swapfile = tmp_path / "swapfile"
    swap.ensure(swapfile, 128)
    try:
        assert swap.active(swapfile) and swapfile.stat().st_mode & 0o777 == 0o600
        swap.ensure(swapfile, 128)          # idempotent: the same file, still on
        assert swap.active(swapfile)
        m = make_machine("t2", 202, memory_mb=64, swap_mb=64)
        local.up(m)
        st = local.status(m)
        assert (st["cgroup"]["memory_limit_bytes"], st["cgroup"]["swap_limit_bytes"]) == (64 * MiB, 64 * MiB)
        if st["cgroup"]["version"] == 1:
            memory = Path(next(p for p in st["cgroup"]["paths"] if "memory" in p))
            assert int((memory / "memory.memsw.limit_in_bytes").read_text()) == 128 * MiB
            assert (memory / "memory.swappiness").read_text().strip() == "60"

        def allocate(mb: int) -> subprocess.CompletedProcess:
            code = f"b = b'x' * ({mb} * 1024 * 1024); print(len(b))"
            return local.run_in(m, [SYSTEM_PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
        over_memory = allocate(90)      # more than its memory, less than memory and swap: swapped, not killed
        assert over_memory.returncode == 0 and over_memory.stdout.strip() == str(90 * MiB), over_memory
        over_both = allocate(200)
        assert over_both.returncode == -signal.SIGKILL, over_both
    finally:
        local.down(m) if "m" in locals() else None
        swap.remove(swapfile)
    assert not swap.active(swapfile) and not swapfile.exists()


def _allowed_cpus(m: Machine) -> str:
    status = local.run_in(m, ["cat", "/proc/self/status"], capture_output=True, text=True, timeout=30).stdout
    return next(line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list"))


@pytest.mark.lab
def test_machines_pinned_to_cpus_of_their_own_run_there_only(make_machine) -> None:
    # This 2-CPU host is too small for the placement to pin the lab's machines; the mechanism works here all
    # the same: one machine on CPU 0, the other on CPU 1, each process started inside confined to its CPU.
    first, second = make_machine("t1", 201, cpuset=(0,)), make_machine("t2", 202, cpuset=(1,))
    for m in (first, second):
        local.up(m)
    assert (_allowed_cpus(first), _allowed_cpus(second)) == ("0", "1")
    assert (local.status(first)["cgroup"]["cpus"], local.status(second)["cgroup"]["cpus"]) == ("0", "1")
    unpinned = make_machine("t3", 203)
    local.up(unpinned)
    assert _allowed_cpus(unpinned) == placement.cpulist(placement.host_cpus())
    assert local.status(unpinned)["cgroup"]["cpus"] is None


@pytest.mark.lab
def test_a_cpu_the_host_does_not_have_is_refused(make_machine) -> None:
    m = make_machine("t1", 201, cpuset=(4096,))
    with pytest.raises(LocalBackendError, match="is to run on CPUs 4096, but"):
        local.up(m)


@pytest.mark.lab
def test_jvm_inside_sees_the_machine_limits(make_machine) -> None:
    m = make_machine("t2", 202, memory_mb=64)
    local.up(m)
    java = ["java", "-XX:+PrintFlagsFinal", "-XshowSettings:system", "-version"]
    result = local.run_in(m, java, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.search(r"Memory Limit: 64\.00M", result.stderr), result.stderr
    max_heap = int(re.search(r"\bMaxHeapSize\s+=\s+(\d+)", result.stdout).group(1))
    assert max_heap <= 64 * MiB  # HotSpot's own ergonomics sized the heap from the cgroup, not host RAM

    # The way the lab runs its JVMs: a supervisord program, as an unprivileged user.
    add_program(m, "jvm", "/usr/bin/java " + " ".join(java[1:]), startsecs="0")
    wait_for(lambda: program_state(m, "jvm") == "EXITED", timeout=30, what="jvm EXITED")
    log = (m.log_dir / "jvm.log").read_text()
    assert re.search(r"Memory Limit: 64\.00M", log), log


@pytest.mark.lab
def test_up_is_idempotent_and_machines_do_not_collide(make_machine) -> None:
    t1, t2 = make_machine("t1", 201), make_machine("t2", 202)
    local.up(t1)
    local.up(t2)
    first = local.status(t1)
    conf_mtime = t1.supervisord_conf.stat().st_mtime_ns
    local.up(t1)
    again = local.status(t1)
    assert again == first
    assert t1.supervisord_conf.stat().st_mtime_ns == conf_mtime
    other = local.status(t2)
    assert other["supervisord"]["pid"] != first["supervisord"]["pid"]
    assert set(other["cgroup"]["paths"]).isdisjoint(first["cgroup"]["paths"])
    assert t1.netns_path.stat().st_ino != t2.netns_path.stat().st_ino
    for m in (t1, t2):
        assert_inside(m, local.status(m)["supervisord"]["pid"])
    inside_t1 = local.run_in(t1, ["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert t1.address in inside_t1 and t2.address not in inside_t1

    local.down(t1)
    after = local.status(t2)
    assert after == other  # bringing t1 down left t2 alone
    assert not local.status(t1)["netns"]


@pytest.mark.lab
def test_down_removes_everything_and_is_idempotent(make_machine) -> None:
    m = make_machine()
    local.up(m)
    add_program(m, "sleeper", "sleep 1000")
    wait_for(lambda: program_state(m, "sleeper") == "RUNNING", what="RUNNING sleeper")
    # A stray daemon started inside by hand, outside supervisord's knowledge: down must still end it.
    local.run_in(m, ["sh", "-c", "setsid sleep 1001 </dev/null >/dev/null 2>&1 &"], check=True)
    netns = f"net:[{m.netns_path.stat().st_ino}]"
    cgroup_paths = [Path(p) for p in local.status(m)["cgroup"]["paths"]]
    supervisord = local.status(m)["supervisord"]["pid"]
    wait_for(lambda: len(local.Cgroup(m, local.detect_cgroups()).pids()) >= 3, what="3 processes in the cgroup")

    local.down(m)

    assert not m.netns_path.exists()
    assert m.netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert subprocess.run(["ip", "link", "show", m.veth], capture_output=True).returncode != 0
    assert not any(p.exists() for p in cgroup_paths)
    assert not m.root.exists()
    conf = str(m.supervisord_conf).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            assert os.readlink(entry / "ns" / "net") != netns, f"pid {entry.name} still in {m.netns}"
            assert conf not in (entry / "cmdline").read_bytes(), f"pid {entry.name} still runs {m.supervisord_conf}"
            assert f"/{PREFIX}/{m.name}" not in (entry / "cgroup").read_text(), f"pid {entry.name} in the cgroup"
        except OSError:  # gone meanwhile, or not ours to look at (this sandbox's pid 1)
            continue
    assert not Path(f"/proc/{supervisord}/cmdline").exists() or not Path(f"/proc/{supervisord}/cmdline").read_bytes()
    st = local.status(m)
    assert not st["netns"] and not st["supervisord"]["running"] and st["cgroup"]["paths"] == []

    local.down(m)  # again: nothing to do, no error


@pytest.mark.lab
def test_address_already_used_by_another_interface(make_machine) -> None:
    m = make_machine("t3", 203)
    subprocess.run(["ip", "link", "add", "ctlt-x0", "type", "veth", "peer", "name", "ctlt-x1"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", "10.213.203.1/30", "dev", "ctlt-x0"], check=True)
        with pytest.raises(LocalBackendError, match=r"ctlt-x0 overlaps machine t3's subnet 10\.213\.203\.0/30"):
            local.up(m)
        assert not m.netns_path.exists() and not m.root.exists()
    finally:
        subprocess.run(["ip", "link", "del", "ctlt-x0"], check=False)


def test_not_root_gets_a_clear_message(tmp_path: Path) -> None:
    code = ("from pathlib import Path\nfrom lab.machines import local\n"
            "try:\n    local.up(local.Machine('t1', 201, Path('/tmp/ctlt-nobody'), prefix='ctlt'))\n"
            "except local.LocalBackendError as e:\n    print(e)\n")
    result = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                             SYSTEM_PYTHON, "-B", "-c", code], capture_output=True, text=True, timeout=30,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO)})
    assert result.stdout.strip() == ("the local backend needs root to create network namespaces and cgroups: "
                                     "run with sudo"), result
    assert not Path("/tmp/ctlt-nobody").exists()


# ------------------------------------------------------------------------------------------ unit tests

@pytest.mark.fast
def test_names_are_validated() -> None:
    with pytest.raises(LocalBackendError, match="15"):
        Machine("averylongname", 201, Path("/tmp/x"), prefix=PREFIX)
    with pytest.raises(LocalBackendError, match="1..254"):
        Machine("t1", 300, Path("/tmp/x"), prefix=PREFIX)
    with pytest.raises(LocalBackendError, match="not valid"):
        Machine("T 1", 201, Path("/tmp/x"))
    lab = local.machines(Path("/var/lib/camel-tuning-lab"))
    assert {name: (m.index, m.netns, m.address, m.host_address, m.root) for name, m in lab.items()} == {
        "default": (1, "ctlab-default", "10.213.1.2", "10.213.1.1", Path("/var/lib/camel-tuning-lab/machines/default")),
        "tuned": (2, "ctlab-tuned", "10.213.2.2", "10.213.2.1", Path("/var/lib/camel-tuning-lab/machines/tuned")),
    }
    d = lab["default"]
    assert (d.memory_mb, d.swap_mb, d.cpus, d.supervisord_conf, d.supervisor_include_dir) == (
        397, 1024, 2.0, d.root / "supervisor" / "supervisord.conf", d.root / "supervisor" / "conf.d")


@pytest.mark.fast
def test_missing_tool_names_its_package(monkeypatch) -> None:
    monkeypatch.setattr(local_machine.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(LocalBackendError, match=r"'supervisord' not found: install the 'supervisor' package"):
        local_machine._tool("supervisord", "supervisor")
    with pytest.raises(LocalBackendError, match=r"'ip' not found: install the 'iproute2' package"):
        local_machine._ip()


@pytest.mark.fast
def test_supervisord_conf() -> None:
    m = Machine("t1", 201, Path("/srv/m/t1"), prefix=PREFIX)
    text = lifecycle.supervisord_conf_text(m)
    for line in ("[unix_http_server]", f"file=/run/camel-tuning-lab/{PREFIX}-t1.sock", "chmod=0700",
                 "logfile=/srv/m/t1/logs/supervisord.log", "pidfile=/srv/m/t1/supervisor/supervisord.pid",
                 "childlogdir=/srv/m/t1/logs", "nodaemon=false",
                 "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
                 f"serverurl=unix:///run/camel-tuning-lab/{PREFIX}-t1.sock", "files = /srv/m/t1/supervisor/conf.d/*.conf"):
        assert line in text.splitlines()


def fake_v2(root: Path, controllers: str = "cpuset cpu io memory hugetlb pids rdma misc") -> Path:
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("\n")
    return root


@pytest.mark.fast
def test_cgroup_v2_writes_against_a_fake_root(tmp_path: Path) -> None:
    root = fake_v2(tmp_path / "cgroup")
    layout = local.detect_cgroups(root, mounts_file=tmp_path / "no-mounts")
    assert (layout.version, layout.root) == (2, root)
    m = Machine("t1", 201, tmp_path / "m", prefix=PREFIX)
    cgroup = local.Cgroup(m, layout)
    cgroup.create()
    leaf = root / "ctlt" / "t1"
    assert (root / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert (root / "ctlt" / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert (leaf / "memory.max").read_text() == str(512 * MiB)
    assert (leaf / "memory.swap.max").read_text() == "0"
    assert (leaf / "cpu.max").read_text() == "200000 100000"
    assert (leaf / "cpu.weight").read_text() == "100"          # the kernel's default share
    assert cgroup.paths == [leaf] and cgroup.procs_files == [leaf / "cgroup.procs"]
    assert (cgroup.memory_limit_bytes(), cgroup.cpu_quota()) == (512 * MiB, 2.0)
    launcher = network._launcher(m, cgroup, ["true"])
    assert f"echo $$ > {leaf / 'cgroup.procs'}" in launcher[2]
    st = local.status(m, cgroups=layout)
    assert st["cgroup"] == {"version": 2, "paths": [str(leaf)], "memory_limit_bytes": 512 * MiB,
                            "swap_limit_bytes": 0, "cpu_quota": 2.0, "cpus": None}

    # As the kernel shows them once enabled: no rewrite. New limits are applied on the next create.
    (root / "cgroup.subtree_control").write_text("cpu memory\n")
    (root / "ctlt" / "cgroup.subtree_control").write_text("cpu memory\n")
    small = Machine("t1", 201, tmp_path / "m", memory_mb=64, cpus=1.5, prefix=PREFIX)
    local.Cgroup(small, layout).create()
    assert (root / "cgroup.subtree_control").read_text() == "cpu memory\n"
    assert (leaf / "memory.max").read_text() == str(64 * MiB)
    assert (leaf / "cpu.max").read_text() == "150000 100000"
    (leaf / "memory.max").write_text("max\n")
    (leaf / "cpu.max").write_text("max 100000\n")
    assert (local.Cgroup(small, layout).memory_limit_bytes(), local.Cgroup(small, layout).cpu_quota()) == (None, None)


@pytest.mark.fast
def test_cgroup_v2_without_memory_controller(tmp_path: Path) -> None:
    root = fake_v2(tmp_path / "cgroup", controllers="cpu io pids")
    layout = local.detect_cgroups(root, mounts_file=tmp_path / "no-mounts")
    with pytest.raises(LocalBackendError, match="no memory controller"):
        local.Cgroup(Machine("t1", 201, tmp_path / "m", prefix=PREFIX), layout).create()


@pytest.mark.fast
def test_cgroup_v1_layout_from_mounts(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
        f"cgroup {tmp_path}/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0\n"
        f"cgroup {tmp_path}/mem\\040ory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0\n"
        f"cgroup2 {tmp_path}/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n")
    layout = local.detect_cgroups(tmp_path / "no-v2-here", mounts_file=mounts)
    assert layout.version == 1
    assert layout.v1_mounts == {"memory": tmp_path / "mem ory", "cpu": tmp_path / "cpu,cpuacct",
                                "cpuacct": tmp_path / "cpu,cpuacct"}
    cgroup = local.Cgroup(Machine("t1", 201, tmp_path / "m", prefix=PREFIX), layout)
    assert cgroup.paths == [tmp_path / "mem ory" / "ctlt" / "t1", tmp_path / "cpu,cpuacct" / "ctlt" / "t1"]

    mounts.write_text("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n")
    with pytest.raises(LocalBackendError, match="no cgroup memory controller available"):
        local.detect_cgroups(tmp_path / "no-v2-here", mounts_file=mounts)


@pytest.mark.fast
def test_cgroup_v2_pins_a_machine_to_its_cpus(tmp_path: Path) -> None:
    root = fake_v2(tmp_path / "cgroup", controllers="cpuset cpu io memory pids")
    (root / "cpuset.cpus.effective").write_text("0-3\n")
    layout = local.detect_cgroups(root, mounts_file=tmp_path / "no-mounts")
    pinned = local.Cgroup(Machine("t1", 201, tmp_path / "m", prefix=PREFIX, cpuset=(2, 3)), layout)
    pinned.create()
    assert (root / "cgroup.subtree_control").read_text() == "+memory +cpu +cpuset"
    assert (root / "ctlt" / "t1" / "cpuset.cpus").read_text() == "2-3" and pinned.cpuset() == "2-3"
    with pytest.raises(LocalBackendError, match="is to run on CPUs 7, but this host's cgroups offer 0-3"):
        local.Cgroup(Machine("t2", 202, tmp_path / "m2", prefix=PREFIX, cpuset=(7,)), layout).create()
    no_cpuset = local.detect_cgroups(fake_v2(tmp_path / "other", controllers="cpu io memory pids"),
                                     mounts_file=tmp_path / "no-mounts")
    with pytest.raises(LocalBackendError, match="offers no cpuset controller"):
        local.Cgroup(Machine("t3", 203, tmp_path / "m3", prefix=PREFIX, cpuset=(0,)), no_cpuset).create()


@pytest.mark.fast
def test_cgroup_v1_refuses_cpus_it_cannot_have_before_making_any_directory(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(f"cgroup {tmp_path}/memory cgroup rw,memory 0 0\n"
                      f"cgroup {tmp_path}/cpuset cgroup rw,cpuset 0 0\n")
    for name in ("memory", "cpuset"):
        (tmp_path / name).mkdir()
    (tmp_path / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    layout = local.detect_cgroups(tmp_path / "no-v2-here", mounts_file=mounts)
    with pytest.raises(LocalBackendError, match="is to run on CPUs 7, but this host's cgroups offer 0-3"):
        local.Cgroup(Machine("t1", 201, tmp_path / "m", prefix=PREFIX, cpuset=(7,)), layout).create()
    # nothing left behind for a later, unpinned machine to inherit
    assert not (tmp_path / "cpuset" / "ctlt").exists() and not (tmp_path / "memory" / "ctlt").exists()


@pytest.mark.fast
def test_down_removes_only_the_account_the_lab_made(monkeypatch):
    from types import SimpleNamespace

    from lab.machines.local import backend as local_backend
    from lab.machines.manifest import role_default
    comment = str(role_default("lab", "lab_user_comment"))
    accounts = {"camellab": SimpleNamespace(pw_gecos=comment, pw_gid=990),
                "someone": SimpleNamespace(pw_gecos="Someone Else", pw_gid=100)}
    groups = {"camellab": SimpleNamespace(gr_gid=990), "users": SimpleNamespace(gr_gid=100)}
    ran = []
    monkeypatch.setattr(local_backend.pwd, "getpwnam", lambda name: accounts[name])
    monkeypatch.setattr(local_backend.grp, "getgrnam", lambda name: groups[name])
    monkeypatch.setattr(local_backend.subprocess, "run", lambda argv, check: ran.append(argv))
    local_backend.remove_account("someone", "users")            # not the lab's: neither it nor its group
    local_backend.remove_account("nobody-here", "camellab")     # no such account: nothing
    assert ran == []
    local_backend.remove_account("camellab", "users")           # the lab's account, a group it does not own
    assert ran == [["userdel", "camellab"]]
    local_backend.remove_account("camellab", "camellab")
    assert ran[-2:] == [["userdel", "camellab"], ["groupdel", "camellab"]]


@pytest.mark.fast
def test_the_load_generator_gets_ten_times_a_machines_share_of_contended_cpus(tmp_path: Path) -> None:
    # An open model's arrivals are as punctual as JMeter's scheduler: on a shared host it must not wait for CPU.
    generator = loadgen.loadgen_machine(tmp_path / "m", (0, 1), pinned=False)
    assert generator.cpu_weight == 10 * Machine("t1", 201, tmp_path / "m").cpu_weight
    root = fake_v2(tmp_path / "v2")
    local.Cgroup(generator, local.detect_cgroups(root, mounts_file=tmp_path / "no-mounts")).create()
    assert (root / "ctlab" / "loadgen" / "cpu.weight").read_text() == "1000"
    # cgroup v1: the same share on its scale (cpu.shares, 1024 for a default machine)
    layout = local.CgroupLayout(version=1, v1_mounts={"memory": tmp_path / "v1" / "memory",
                                                      "cpu": tmp_path / "v1" / "cpu"})
    local.Cgroup(generator, layout).create()
    assert (tmp_path / "v1" / "cpu" / "ctlab" / "loadgen" / "cpu.shares").read_text() == "10240"
    with pytest.raises(LocalBackendError, match="cpu_weight 0 is not within 1..10000"):
        Machine("t1", 201, tmp_path / "m", cpu_weight=0)
