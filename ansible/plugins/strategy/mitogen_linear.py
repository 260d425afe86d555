"""Ansible's linear strategy run by Mitogen, for the plays that name it (site.yml's provisioning plays): a Python
interpreter started once on each machine and kept for the play, each task's module run in it, instead of a fresh
interpreter per task. Under the VM test's software emulation that start-up was most of a task's 5 s: the two VMs'
provisioning took 219 s with it, 533 s without. Short plays and one-command reads (fetch.yml, engines.yml, status)
keep Ansible's own strategy: for them, starting Mitogen on a machine costs more than it saves (a run's check of the
two emulated VMs: 68 s with it, 17 s without; collecting their evidence 126 s against 39 s). Connections Mitogen
does not carry run as Ansible runs them.

This is Mitogen's own proxy module (ansible_mitogen/plugins/strategy/mitogen_linear.py), found here by a path
ansible.cfg can name rather than one inside the venv's site-packages, which holds the Python version."""
import ansible_mitogen.loaders
import ansible_mitogen.strategy

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):
    pass
