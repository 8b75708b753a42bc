"""`registry coverage` and `registry plot` end to end, on SQLite and PostgreSQL.

Exact output on the seed (the README shows the same table), the generated registry with holes of
tests/db/test_coverage.py for JSON and CSV, exit codes for empty selections, and the message a user
without matplotlib gets (a real subprocess in which the module cannot be imported).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from registry_db.importing import write as importer
from tests.helpers import ALPHA, BETA, ROOT, SEED, png_size, run_cli, write_grid_set

SEED_TABLE = """\
model                speculative_method  thinking  category  k1  k2     k3  k4    k5
-------------------  ------------------  --------  --------  --  --  -----  --  ----
deepseek-v4.1-flash  dspark              off       coding     -   -     -    -  4.07
deepseek-v4.1-flash  dspark              on        coding     -   -     -    -  3.51
glm-5.3              mtp                 off       coding     -   -     -    -     -
glm-5.3              mtp                 on        coding     -   -  2.99c   -     -

3 of 20 cells stored. Marks: c copied
"""


def run(url: str, *args: str):
    """``registry -d URL ARGS`` in process (no traceback allowed)."""
    return run_cli("-d", url, *args)




@pytest.fixture
def holes(engine, db_url, tmp_path) -> str:
    importer.import_paths(engine, [write_grid_set(tmp_path, "alpha", ALPHA),
                                   write_grid_set(tmp_path, "beta", BETA)])
    return db_url


# --- coverage ---------------------------------------------------------------------------------

def test_coverage_table_of_the_seed(seeded):
    result = run(seeded, "coverage")
    assert result.exit_code == 0, result.output
    assert result.stdout == SEED_TABLE


def test_coverage_table_marks_and_alignment(holes):
    result = run(holes, "coverage", "--category", "coding")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        # Both sets' values at K 2 (alpha measured 2.4, beta literature 2.5), marks hung right.
        "model  speculative_method  thinking  category   k1         k2  k3   k4  k5    k6",
        "-----  ------------------  --------  --------  ---  ---------  --  ---  --  ----",
        "m1     eagle               off       coding    1.8  2.4/2.5l*   -  3.1   -  3.5c",
        "m1     eagle               on        coding      -      2.0a    -    -   -    -",
        "m2     mtp                 off       coding      -        -     -    -   -    -",
        "m2     mtp                 on        coding      -        -     -    -   -    -",
        "",
        "5 of 24 cells stored. Marks: c copied; a assumed; l literature; * held by several "
        "sets (resolve refuses it; pick with --set)",
    ]


def test_coverage_json_lists_every_cell(holes):
    result = run(holes, "coverage", "--model", "m2", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [(r["thinking"], r["category"]) for r in rows] == [
        ("off", "chat"), ("off", "coding"), ("on", "chat"), ("on", "coding")]
    assert rows[2]["cells"] == [
        {"k": k, "acceptance_length": al, "method": "measured", "sets": ["beta"],
         "uncertainty": None, "values": [{"profile_set": "beta", "acceptance_length": al,
                                          "method": "measured", "uncertainty": None}]}
        for k, al in ((1, 1.9), (2, 2.6), (3, 3.0))
    ]
    assert all(c == {"k": c["k"], "acceptance_length": None, "method": None, "sets": [],
                     "uncertainty": None, "values": []}
               for r in rows if r is not rows[2] for c in r["cells"])


def test_coverage_csv_is_one_line_per_cell_and_value(holes):
    result = run(holes, "coverage", "--set", "alpha", "--set", "beta", "--csv")
    assert result.exit_code == 0, result.output
    lines = list(csv.DictReader(io.StringIO(result.stdout)))
    # One line per cell, and one per set where the sets hold different values (m1 K 2).
    assert len(lines) == 8 * 6 + 1
    key = {"model": "m1", "speculative_method": "eagle", "thinking": "off",
           "category": "coding", "k": "2"}
    assert [r for r in lines if r["k"] == "2" and r["acceptance_length"]
            and r["model"] == "m1" and r["thinking"] == "off"] == [
        {**key, "acceptance_length": "2.4", "method": "measured", "sets": "alpha"},
        {**key, "acceptance_length": "2.5", "method": "literature", "sets": "beta"}]


def test_coverage_of_an_empty_selection_is_exit_1(holes):
    result = run(holes, "coverage", "--model", "m1", "--category", "chat")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "Error: no stored profile matches model 'm1', category 'chat'. With category 'chat', "
        "the registry holds model: m2. With model 'm1', it holds category: coding.\n")
    result = run(holes, "coverage", "--set", "gamma")
    assert result.exit_code == 1
    assert "no profile set named 'gamma'" in result.stderr


def test_coverage_of_an_empty_registry(db_url):
    result = run(db_url, "coverage", "--json")
    assert result.exit_code == 1 and result.stdout == ""
    assert "the registry holds no profiles yet" in result.stderr


# --- plot -------------------------------------------------------------------------------------

def test_plot_writes_png_and_svg(holes, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "curves.png"
    result = run(holes, "plot", "--category", "coding", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{out}\n"
    assert result.stderr == "3 line(s), 6 point(s)\n"
    assert png_size(out.read_bytes()) == (1200, 780)
    svg = tmp_path / "m2.svg"
    result = run(holes, "plot", "--model", "m2", "--thinking", "on", "-o", str(svg))
    assert result.exit_code == 0, result.output
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert result.stderr == "1 line(s), 3 point(s)\n"
    result = run(holes, "plot", "--set", "beta", "-o", str(svg), "--force", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"file": str(svg), "format": "svg", "lines": 2,
                                         "points": 4}
    assert result.stderr == ""


def test_plot_of_an_empty_selection_is_exit_1(holes, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "none.png"
    result = run(holes, "plot", "--model", "m2", "--thinking", "off", "-o", str(out))
    assert result.exit_code == 1 and not out.exists()
    assert result.stderr == (
        "Error: no stored profile matches model 'm2', thinking 'off'. With thinking 'off', "
        "the registry holds model: m1. With model 'm2', it holds thinking: on.\n")


@pytest.mark.parametrize("name", ["curves.jpg", "curves"])
def test_plot_needs_a_png_or_svg_name(db_url, tmp_path, name):
    result = run(db_url, "plot", "-o", str(tmp_path / name))
    assert result.exit_code == 2
    assert "must end in .png or .svg" in result.stderr


def test_plot_without_matplotlib_names_the_install_command(tmp_path):
    """A real process in which `import matplotlib` fails, as it does when the extra is absent."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\nsys.modules['matplotlib'] = None  # import now raises ImportError\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(hide), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "registry_db", "-d", str(tmp_path / "r.db"), "plot",
         "-o", str(tmp_path / "c.png")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr == (
        "Error: registry plot needs matplotlib, which is not installed; install the plot "
        "extra: pip install 'registry_db[plot]'  (in a checkout: pip install -e '.[plot]')\n")
    assert not (tmp_path / "r.db").exists()  # refused before the database was touched


def test_plot_never_loads_pyplot_so_no_window_can_open(tmp_path):
    """A real process: importing the seed and plotting it leaves pyplot (the only way to a GUI
    backend or a window) unimported, whatever backend the environment asks for."""
    pytest.importorskip("matplotlib")
    code = (
        "import sys\n"
        "from registry_db.cli import main\n"
        "for argv in sys.argv[1:]:\n"
        "    try:\n"
        "        main(argv.split('|'))\n"
        "    except SystemExit as exc:\n"
        "        assert not exc.code, (argv, exc.code)\n"
        "print('matplotlib' in sys.modules, 'matplotlib.pyplot' in sys.modules)\n")
    db, out = tmp_path / "r.db", tmp_path / "c.png"
    env = {**os.environ, "MPLBACKEND": "TkAgg",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", code, f"-d|{db}|import|{SEED}", f"-d|{db}|plot|-o|{out}"],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "True False"  # drawn with matplotlib, not pyplot
    assert png_size(out.read_bytes()) == (1200, 780)


# --- the README's pictures --------------------------------------------------------------------

README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_block(marker: str, lang: str) -> str:
    tail = README.split(f"<!-- pictures: {marker} -->\n", 1)[1]
    assert tail.startswith(f"```{lang}\n"), marker
    return tail[len(lang) + 4:].split("```", 1)[0]


def test_the_readme_shows_the_seeds_coverage(seeded):
    assert readme_block("seed-coverage", "text") == SEED_TABLE == run(seeded, "coverage").stdout
    shown = README.split("$ registry coverage --model glm-5.3 --category chat\n", 1)[1]
    result = run(seeded, "coverage", "--model", "glm-5.3", "--category", "chat")
    assert result.exit_code == 1
    assert shown.split("```", 1)[0] == result.stderr


@pytest.mark.only_backend("sqlite")
def test_the_readmes_picture_is_what_its_command_draws(backend, tmp_path, monkeypatch):
    """The documented command, run in a scratch folder, draws a picture like the committed one:
    a PNG of the same size, with the seed's three lines (pixels differ across font versions)."""
    pytest.importorskip("matplotlib")
    command = readme_block("seed-curves", "sh").strip()
    assert "](docs/seed-curves.png)" in README
    steps = [step.split() for step in command.split(" && ")]
    assert steps[0] == ["rm", "-f", "seed.db"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "seed").symlink_to(SEED.parent)
    (tmp_path / "docs").mkdir()
    from click.testing import CliRunner

    from registry_db.cli import main

    for argv in steps[1:]:
        assert argv[0] == "registry"
        result = CliRunner().invoke(main, argv[1:])
        assert result.exit_code == 0, result.output
    assert result.stderr == "3 line(s), 3 point(s)\n"
    drawn = (tmp_path / "docs" / "seed-curves.png").read_bytes()
    committed = (ROOT / "docs" / "seed-curves.png").read_bytes()
    assert png_size(drawn) == png_size(committed) == (1200, 780)


def test_plot_says_when_a_panel_is_too_crowded_to_read(engine, db_url, tmp_path):
    pytest.importorskip("matplotlib")
    crowd = [("m9", f"x{i}", 1, t, "coding", 1.5) for i in range(7) for t in ("off", "on")]
    importer.import_paths(engine, [write_grid_set(tmp_path, "crowd", crowd)])
    result = run(db_url, "plot", "-o", str(tmp_path / "crowd.png"))
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "14 line(s), 14 point(s)\n"
        "one panel holds 14 lines, too many to tell apart: narrow with --method, --thinking "
        "or --category\n")
