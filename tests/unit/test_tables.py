"""Tables that fit the terminal (issue 28.8): the longest cells are shortened with `…` (URLs and
paths from the middle), numbers never; in a pipe nothing is cut."""

from __future__ import annotations

from registry_db.cli.output import fit_widths, format_table, shorten

URL = ("https://github.com/SemiAnalysisAI/InferenceX/blob/main/inferencex-e2e/infx/"
       "golden_al_distribution/dsv41flash_dspark.yaml")


def test_a_url_is_shortened_from_the_middle_and_keeps_both_ends():
    short = shorten(URL, 40)
    assert len(short) == 40 and "…" in short
    head, tail = short.split("…")
    assert URL.startswith(head) and URL.endswith(tail)
    assert tail.endswith("/dsv41flash_dspark.yaml") and head.startswith("https://git")


def test_plain_text_is_shortened_at_its_end():
    assert shorten("superseded by the new image", 12) == "superseded …"
    assert shorten("short", 12) == "short"
    assert shorten("abcdef", 1) == "…"


def test_the_widest_columns_give_way_first():
    # Two columns of 60 and 10 in 50: the wide one shrinks, the narrow one keeps its width.
    assert fit_widths([60, 10], [6, 6], 50) == [38, 10]
    # Both wide: they end at the same width.
    assert fit_widths([60, 60], [6, 6], 50) == [24, 24]
    # Already fitting: unchanged; no room at all: the floors.
    assert fit_widths([10, 10], [6, 6], 80) == [10, 10]
    assert fit_widths([60, 60], [6, 8], 4) == [6, 8]


def test_a_table_fits_the_width_and_numbers_stay_whole():
    rows = [("inferencex-golden-al", 4.0700001, URL), ("x", 123456.5, "a note")]
    text = format_table(["set", "acceptance_length", "source"], rows, width=60)
    lines = text.splitlines()
    assert all(len(line) <= 60 for line in lines), lines
    assert "4.07" in lines[2] and "123456.5" in lines[3]
    assert "…" in lines[2] and lines[2].endswith("dspark.yaml")
    # No width (a pipe): nothing is cut.
    assert URL in format_table(["set", "acceptance_length", "source"], rows)


def test_prose_and_notes_wrap_to_the_terminal_and_stay_whole_in_a_pipe():
    from registry_db.cli.output import wrapped
    from registry_db.cli.read import _prose

    text = "Coding only. Every curve is SPEED-Bench Qualitative coding; other categories have none."
    lines = _prose("  - ", text, 80).split("\n")
    assert [len(line) <= 80 for line in lines] == [True, True]
    assert lines[1].startswith("    ") and " ".join(" ".join(lines).split()) == "- " + text
    assert _prose("  - ", text + "\nsecond", None) == "  - " + text + "\nsecond"  # a pipe
    assert wrapped("a " * 50, None) == ["a " * 50]
    assert all(len(line) <= 30 for line in wrapped("word " * 40, 30, "   "))
