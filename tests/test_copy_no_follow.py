"""Evidence is copied as root from folders the service account owns: a link it puts there must never
make root read (and put into a shareable run folder) another file."""
from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO))
from lab.machines.local.backend import LocalBackend  # noqa: E402
from lab.machines.protocol import copy_no_follow, unpack_plain_files  # noqa: E402

pytestmark = pytest.mark.fast


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    (tmp_path / "secret").write_text("root's only\n")
    home = tmp_path / "home"
    (home / "app" / "logs").mkdir(parents=True)
    (home / "app" / "logs" / "app.log").write_text("Started Application\n")
    os.utime(home / "app" / "logs" / "app.log", (1_700_000_000, 1_700_000_000))
    return home


def test_a_plain_file_is_copied_for_its_owner_only(home, tmp_path):
    target = tmp_path / "out" / "app" / "logs" / "app.log"
    assert copy_no_follow(home, Path("app/logs/app.log"), target)
    assert target.read_text() == "Started Application\n"
    assert (target.stat().st_mode & 0o777, target.stat().st_mtime) == (0o600, 1_700_000_000)


def test_a_link_in_place_of_the_file_is_not_followed(home, tmp_path):
    (home / "app" / "logs" / "gc.log").symlink_to(tmp_path / "secret")
    assert not copy_no_follow(home, Path("app/logs/gc.log"), tmp_path / "out" / "gc.log")
    assert not (tmp_path / "out" / "gc.log").exists()


def test_a_link_in_place_of_a_folder_is_not_followed(home, tmp_path):
    (home / "pcp").symlink_to(tmp_path)
    assert not copy_no_follow(home, Path("pcp/secret"), tmp_path / "out" / "secret")
    assert not (tmp_path / "out").exists()


def test_a_fifo_is_not_read(home, tmp_path):
    os.mkfifo(home / "app" / "logs" / "pipe.log")       # opening it for reading would block for ever
    assert not copy_no_follow(home, Path("app/logs/pipe.log"), tmp_path / "out" / "pipe.log")


def test_the_local_backend_pulls_the_files_and_names_the_links_it_left(home, tmp_path, monkeypatch):
    (home / "app" / "logs" / "error.log").symlink_to(tmp_path / "secret")
    backend = LocalBackend(root=tmp_path / "machines")
    monkeypatch.setattr(backend, "home", lambda name: home)
    pulled = backend.pull("default", ["app/logs/*.log"], tmp_path / "out")
    assert pulled.files == [tmp_path / "out" / "app" / "logs" / "app.log"]
    assert pulled.problem == "not copied, a link or not a plain file: app/logs/error.log"


def test_an_archive_from_a_machine_gives_its_plain_files_only(tmp_path: Path) -> None:
    # What ansible/fetch.yml brings from a VM or an SSH host: the service account packed it, so it may hold a
    # link to a file only root reads, or a member named to land outside the run folder. Neither is written.
    archive = tmp_path / "tuned.tar"
    with tarfile.open(archive, "w") as packed:
        data = b"[0.010s][info][gc] GC(0) Pause Young\n"
        member = tarfile.TarInfo("app/gc/gc.log")
        member.size, member.mtime, member.mode = len(data), 1_795_000_000, 0o644
        packed.addfile(member, io.BytesIO(data))
        link = tarfile.TarInfo("app/gc/gc.log.planted")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        packed.addfile(link)
        escape = tarfile.TarInfo("../../escaped")
        escape.size = 1
        packed.addfile(escape, io.BytesIO(b"x"))
    out = tmp_path / "run" / "machines" / "tuned"
    written, refused = unpack_plain_files(archive, out)
    assert written == [out / "app" / "gc" / "gc.log"] and written[0].read_bytes() == data
    assert oct(written[0].stat().st_mode & 0o777) == "0o600" and written[0].stat().st_mtime == 1_795_000_000
    assert refused == ["app/gc/gc.log.planted", "../../escaped"]
    assert not (out / "app" / "gc" / "gc.log.planted").exists() and not (tmp_path / "run" / "escaped").exists()
