"""Where the two machines come from: a backend (local, ssh, vagrant) behind one interface
(lab/machines/protocol.py), chosen by lab/machines/choose.py; what each machine runs, as its
provisioning wrote it, is read from its manifest (lab/machines/manifest.py). Their names: lab/names.py."""

