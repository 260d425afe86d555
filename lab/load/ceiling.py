"""What the load generator can send on this host, measured before the run that relies on it: JMeter's open model, as
a capacity run's, against a target that costs nearly nothing (HTTPD's event MPM serving a small static file in
the load generator's own network, lab/machines), stepped up until its requests no longer arrive at the rate or
its answers miss the run's SLO. On a host where JMeter and the machines share CPUs the ceiling is JMeter's and
that target's together: a lower bound of what JMeter alone could send (lab/analysis/capacity.py:
generator_ceiling()).

Its files, kept in the run folder (jmeter/generator/): the results as any machine's (JMeter's thread group
"default" loads the target), target.json (where it listened, how it was loaded), the target's config and log. A run
that copied an earlier one's (lab/generator.py: measure_ceiling()) has those files too, and copied.json naming it."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

from lab.interrupts import deferred
from lab.load.engines import wait_until_listening
from lab.load.network import ClientNetwork
from lab.load.openmodel import Slo, StepLoad
from lab.load.processes import kill
from lab.load.profile import LoadError, LoadResult
from lab.load.run import run
from lab.machines.manifest import role_os_value
from lab.runfolder import JMeterFolder, RunFolder

PORT = 8099
PATH = "/ceiling.txt"
GROUP = "default"           # the plan's thread group that loads the target
START_S = 30.0
# Coarse and short: a line to set each machine's steps against, ended once steps fell behind or missed (JMeter's
# graceful shutdown still runs some seconds of the schedule: the early end saves most where it falls behind early).
# JMeter starts cold (its JIT, its threads, its HTTP client): its first seconds are a warm-up, not judged.
# Two steps in a row: JMeter still warming up fell behind once at 800 req/s (545 arrived) and then delivered 1,200.
STEPS = StepLoad(start_rps=400, step_rps=400, step_s=5, max_rps=3200, connect_timeout_ms=1000,
                 response_timeout_ms=1000, stop_after_misses=2, warmup_s=5, stop_when_behind=True)

CONFIG = """# The load generator's ceiling: a target that costs nearly nothing (lab/load/ceiling.py)
ServerRoot "{root}"
Listen {address}:{port}
PidFile "{root}/httpd.pid"
ErrorLog "{log}"
LogLevel warn
LoadModule mpm_event_module {modules}/mod_mpm_event.so
LoadModule authz_core_module {modules}/mod_authz_core.so
User nobody
Group nogroup
ServerName ceiling
ServerTokens Prod
ListenBacklog 4096
StartServers 2
ServerLimit 4
ThreadsPerChild 64
MaxRequestWorkers 256
KeepAlive On
DocumentRoot "{root}/htdocs"
<Directory "{root}/htdocs">
    Require all granted
</Directory>
"""


def profile(slo: Slo, reach_rps: int | None = None) -> StepLoad:
    """The ceiling's steps, judged by the capacity run's own SLO. reach_rps: the most the run's own steps send; the
    ceiling's steps then end one step past the first that reaches it (room for the one step JMeter may fall behind in
    while warming up), since a ceiling above what the run sends changes no step's judgement: it says "at least"."""
    steps = replace(STEPS, slo=slo)
    if reach_rps is None:
        return steps
    reaching = next((rate for rate in steps.rates() if rate >= reach_rps), steps.max_rps)
    return replace(steps, max_rps=min(steps.max_rps, reaching + steps.step_rps))


@contextmanager
def static_target(network: ClientNetwork, folder: Path) -> Iterator[str]:
    """HTTPD serving PATH in the load generator's network until the block ends: its base URL. Its config and error
    log go to folder; its document root is a folder of its own that its workers (nobody) can read."""
    binary = str(role_os_value("httpd", "httpd_binary"))
    if shutil.which(binary) is None:
        raise LoadError(f"{binary} (HTTPD) is not installed on this host: the load generator's ceiling needs it")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lab-ceiling-") as root:
        Path(root).chmod(0o755)
        (Path(root) / "htdocs").mkdir(mode=0o755)
        (Path(root) / "htdocs" / PATH.lstrip("/")).write_text("ok\n")
        config = folder / "httpd.conf"
        config.write_text(CONFIG.format(root=root, address=network.address, port=PORT, log=folder / "httpd-error.log",
                                        modules=role_os_value("httpd", "httpd_modules_dir")))
        with (folder / "httpd.out").open("w") as sink:
            popen = subprocess.Popen([*network.prefix, binary, "-f", str(config), "-DFOREGROUND"],
                                     stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            wait_until_listening(network.address, PORT, lambda: popen.poll() is None, START_S,
                                 what="the ceiling's HTTPD")
            yield f"http://{network.address}:{PORT}"
        finally:
            with deferred():
                kill(popen)


def measure(network: ClientNetwork, out: JMeterFolder, steps: StepLoad, cpus: str | None) -> LoadResult:
    """The ceiling's load (profile()'s steps) into out (target.json says what it loaded); LoadError when it cannot be
    measured."""
    with static_target(network, out.root) as url:
        RunFolder.write_json(out.root / "target.json", {"url": url + PATH, "group": GROUP, "where": network.where,
                                                        "cpus": cpus, "profile": {"model": steps.model, **asdict(steps)}})
        return run({GROUP: url}, steps, out.root, schedule="sequential", path=PATH, allow_any_host=True,
                   network=network, cpus=cpus, dashboards=False)
