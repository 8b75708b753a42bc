"""`registry plot -o` writes as `export` does (issue 27.21): a temporary file renamed into place,
no symlink followed, and a different existing file replaced only with `--force`."""

from __future__ import annotations

import os

import pytest

from tests.helpers import run_cli

pytest.importorskip("matplotlib")




def test_a_different_file_is_replaced_only_with_force(seeded, tmp_path):
    out = tmp_path / "curves.png"
    out.write_bytes(b"my own picture")
    refused = run_cli("-d", seeded, "plot", "-o", str(out))
    assert refused.exit_code == 1
    assert str(out) in refused.stderr and "--force" in refused.stderr
    assert out.read_bytes() == b"my own picture"
    forced = run_cli("-d", seeded, "plot", "--force", "-o", str(out))
    assert forced.exit_code == 0, forced.output
    assert out.read_bytes().startswith(b"\x89PNG")


def test_the_same_picture_again_needs_no_force_and_is_renamed_into_place(seeded, tmp_path):
    (tmp_path / "pictures").mkdir()
    out = tmp_path / "pictures" / "curves.svg"
    assert run_cli("-d", seeded, "plot", "-o", str(out)).exit_code == 0
    first = os.stat(out).st_ino
    again = run_cli("-d", seeded, "plot", "-o", str(out))
    assert again.exit_code == 0, again.output
    # A new inode: the picture went to a temporary file and was renamed over the old one,
    # so a reader never sees half of it; nothing is left beside it.
    assert os.stat(out).st_ino != first
    assert sorted(p.name for p in out.parent.iterdir()) == ["curves.svg"]


def test_a_symlink_is_never_followed(seeded, tmp_path):
    target = tmp_path / "elsewhere.png"
    target.write_bytes(b"not yours")
    link = tmp_path / "curves.png"
    link.symlink_to(target)
    refused = run_cli("-d", seeded, "plot", "-o", str(link))
    assert refused.exit_code == 1 and str(link) in refused.stderr
    assert target.read_bytes() == b"not yours" and link.is_symlink()
    forced = run_cli("-d", seeded, "plot", "--force", "-o", str(link))
    assert forced.exit_code == 0, forced.output
    # The link itself was replaced by the picture; what it pointed at is untouched.
    assert not link.is_symlink() and link.read_bytes().startswith(b"\x89PNG")
    assert target.read_bytes() == b"not yours"


def test_an_export_through_a_symlink_never_writes_its_target(seeded, tmp_path):
    target = tmp_path / "elsewhere.yaml"
    out = tmp_path / "out"
    out.mkdir()
    assert run_cli("-d", seeded, "export", "-o", str(out)).exit_code == 0
    written = out / "inferencex-golden-al.yaml"
    target.write_bytes(written.read_bytes())  # the same content, behind a link
    written.unlink()
    written.symlink_to(target)
    refused = run_cli("-d", seeded, "export", "-o", str(out))
    assert refused.exit_code == 1 and written.is_symlink()
    assert run_cli("-d", seeded, "export", "--force", "-o", str(out)).exit_code == 0
    assert not written.is_symlink() and target.exists()
