"""Installs the Ansible collections the roles use (ansible/requirements.yml) beside ansible-core, and
nothing else: each is taken out of the `ansible` community bundle that ansible/collections-bundle.txt
pins with its hashes (pip checks them). The bundle itself, a hundred-odd collections, is never
installed. Run by tools/install-deps with the venv's Python; does nothing when every collection is
there at its version.

    .venv/bin/python tools/install_collections.py
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

import yaml

ANSIBLE = Path(__file__).resolve().parent.parent / "ansible"
REQUIREMENTS = ANSIBLE / "requirements.yml"
BUNDLE = ANSIBLE / "collections-bundle.txt"


class CollectionError(Exception):
    """What went wrong, in one line for the user."""


def wanted(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """{namespace.name: version} from requirements.yml, every entry pinned to one version."""
    entries = (yaml.safe_load(requirements.read_text()) or {}).get("collections") or []
    found = {}
    for entry in entries:
        name, version = entry.get("name", ""), str(entry.get("version", ""))
        if name.count(".") != 1 or not version or any(c in version for c in "<>=*,! "):
            raise CollectionError(f"{requirements}: each collection needs a name namespace.name and one exact "
                                  f"version (found name {name!r}, version {version!r})")
        found[name] = version
    return found


def version_in(folder: Path) -> str | None:
    """The version a collection's MANIFEST.json names, or None where there is none."""
    try:
        return json.loads((folder / "MANIFEST.json").read_text())["collection_info"]["version"]
    except (OSError, ValueError, KeyError):
        return None


def extract(wheel: Path, collections: dict[str, str], root: Path) -> None:
    """Each collection's files out of the bundle's wheel into root/<namespace>/<name>, replacing what
    was there; its MANIFEST.json must name the pinned version."""
    with zipfile.ZipFile(wheel) as bundle:
        for name, version in collections.items():
            prefix = "ansible_collections/" + name.replace(".", "/") + "/"
            members = [m for m in bundle.infolist() if m.filename.startswith(prefix) and not m.is_dir()]
            if not members:
                raise CollectionError(f"{wheel.name} holds no collection {name}: change {REQUIREMENTS.name} "
                                      f"or the bundle in {BUNDLE.name}")
            target = root.joinpath(*name.split("."))
            staging = target.with_name(target.name + ".new")
            shutil.rmtree(staging, ignore_errors=True)
            for member in members:
                relative = PurePosixPath(member.filename[len(prefix):])
                if relative.is_absolute() or ".." in relative.parts:
                    raise CollectionError(f"{wheel.name}: refusing the member {member.filename}")
                destination = staging.joinpath(*relative.parts)
                destination.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as source, destination.open("wb") as out:
                    shutil.copyfileobj(source, out)
            found = version_in(staging)
            if found != version:
                shutil.rmtree(staging)
                raise CollectionError(f"{wheel.name} holds {name} {found}, but {REQUIREMENTS.name} pins {version}: "
                                      f"pin the bundle that ships it in {BUNDLE.name}")
            shutil.rmtree(target, ignore_errors=True)
            staging.rename(target)


def download_bundle(folder: Path) -> Path:
    """The bundle's wheel, checked against the hashes pinned in collections-bundle.txt."""
    result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                             "--require-hashes", "-r", str(BUNDLE), "-d", str(folder)],
                            capture_output=True, text=True)
    wheels = sorted(folder.glob("ansible-*.whl"))
    if result.returncode != 0 or not wheels:
        raise CollectionError(f"pip download of the bundle in {BUNDLE} failed: {result.stderr.strip()[-500:]}")
    return wheels[0]


def main() -> int:
    root = Path(sysconfig.get_paths()["purelib"]) / "ansible_collections"
    try:
        collections = wanted()
        missing = {name: version for name, version in collections.items()
                   if version_in(root.joinpath(*name.split("."))) != version}
        if not missing:
            return 0
        print(f"install-collections: {', '.join(f'{n} {v}' for n, v in missing.items())} from {BUNDLE.name}")
        with tempfile.TemporaryDirectory(prefix="lab-collections-") as scratch:
            extract(download_bundle(Path(scratch)), missing, root)
    except CollectionError as error:
        print(f"install-collections: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
