"""./start.sh ablate: which knob group bought what. The groups (ansible/knob-groups.yml, groups.py), the
configurations between the default machine and the tuned one, and the path and shares computed from
their measurements (lab/ablation/analysis.py)."""
