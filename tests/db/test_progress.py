"""Progress bars (issue 28.9): on stderr when it is a terminal, for import, export and ingest;
never in a pipe; `--quiet` turns them off. Real processes on a pseudo-terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_in_terminal, write_set

pytestmark = pytest.mark.slow

#: More files than the fewest that get a bar (cli/output.py PROGRESS_MIN).
MANY = 24
CURVE = Path(__file__).resolve().parents[1] / "data" / "sources" / "inferencex" / \
    "example_eagle3.yaml"


def _bar(stderr: str, label: str) -> bool:
    """Whether click's bar for ``label`` was drawn (its label, then the bar's '#' fill)."""
    return any(label in line and "#" in line for line in stderr.replace("\r", "\n").splitlines())


@pytest.fixture
def folder(tmp_path):
    for i in range(MANY):
        write_set(tmp_path / "sets", f"set-{i:02d}", 2, model=f"m{i}")
    return tmp_path / "sets"


def test_import_and_export_draw_a_bar_on_a_terminal(db_url, folder, tmp_path):
    code, _, err = run_in_terminal("-d", db_url, "import", str(folder), stderr_tty=True)
    assert code == 0, err
    assert _bar(err, "validating") and _bar(err, "writing"), err
    code, _, err = run_in_terminal("-d", db_url, "export", "-o", str(tmp_path / "out"),
                                   stderr_tty=True)
    assert code == 0, err
    assert _bar(err, "exporting"), err
    assert len(list((tmp_path / "out").glob("*.yaml"))) == MANY


def test_no_bar_in_a_pipe_or_with_quiet(db_url, folder, tmp_path):
    code, _, err = run_in_terminal("-d", db_url, "import", str(folder), stderr_tty=False)
    assert code == 0 and "#" not in err and "validating" not in err, err
    code, _, err = run_in_terminal("-d", db_url, "import", "--quiet", str(folder),
                                   stderr_tty=True)
    assert code == 0 and "validating" not in err and "writing" not in err, err
    for quiet in ([], ["--quiet"]):
        code, _, err = run_in_terminal("-d", db_url, "export", "-o", str(tmp_path / "o"),
                                       "--force", *quiet, stderr_tty=bool(quiet))
        assert code == 0 and "exporting" not in err, err


@pytest.mark.only_backend("sqlite")  # ingest touches no database
def test_ingest_draws_a_bar_on_a_terminal_and_not_when_quiet(backend, tmp_path):
    curves = tmp_path / "curves"
    curves.mkdir()
    for i in range(MANY):
        (curves / f"curve_{i:02d}.yaml").write_text(CURVE.read_text())
    args = ("ingest", "inferencex", str(curves), "--engine-image", "img:1",
            "-o", str(tmp_path / "acceptance"))
    code, _, err = run_in_terminal(*args, stderr_tty=True)
    assert code == 0, err
    assert _bar(err, "reading"), err
    code, _, err = run_in_terminal(*args, "--quiet", stderr_tty=True)
    assert code == 0 and "reading" not in err, err
    code, _, err = run_in_terminal(*args, stderr_tty=False)
    assert code == 0 and "reading" not in err, err
