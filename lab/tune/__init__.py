"""./start.sh tune: a search over the knob space (ansible/knob-space.yml) on the tuned machine."""
