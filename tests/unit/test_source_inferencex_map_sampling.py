"""``ingest inferencex --map``: a file's entry gives sampling per thinking mode, as the
collectors run them (SemiAnalysisAI/InferenceX 67ba7fb5ee54 qwen3.827b_fp8_mtp.yaml's header,
tests/data/sources/inferencex/real/: thinking_on temperature 1.0 top_p 0.95, thinking_off
temperature 0.7 top_p 0.8). No database.

The curve here states no sampling, as curves whose collector writes it elsewhere do; before, an
entry's ``sampling: {temperature: 1.0}`` gave both modes 1.0 and the thinking-off profiles of
one collector output were stored at the wrong temperature.
"""

from __future__ import annotations

import pytest

from registry_db.errors import InvalidInput
from registry_db.sources.inferencex.read import load_map, read_inferencex

HEADER = "# dataset: coding\n# Measured on m (B300, vLLM MTP).\n"
BODY = "m:\n  thinking_off:\n    1: 1.9\n  thinking_on:\n    1: 1.73\n"
IMAGE = "vllm/vllm-openai:v0.22.0"


def files(tmp_path, entry: str, header: str = HEADER) -> tuple[str, str]:
    (tmp_path / "c.yaml").write_text(header + BODY)
    (tmp_path / "map.yaml").write_text(f"files:\n  c.yaml:\n{entry}")
    return str(tmp_path / "c.yaml"), str(tmp_path / "map.yaml")


def sampling(tmp_path, entry: str, header: str = HEADER) -> dict:
    curve, map_file = files(tmp_path, entry, header)
    (ps,) = read_inferencex([curve], curve_map=load_map(map_file), engine_image=IMAGE).sets
    return {p.thinking: p.provenance.sampling for p in ps.profiles}


def test_each_mode_gets_its_own_sampling(tmp_path):
    got = sampling(tmp_path, "    sampling:\n"
                             "      thinking_on: {temperature: 1.0, top_p: 0.95, top_k: 20}\n"
                             "      thinking_off: {temperature: 0.7, top_p: 0.8, top_k: 20}\n")
    assert (got["on"].temperature, got["on"].top_p, got["on"].top_k) == (1.0, 0.95, 20)
    assert (got["off"].temperature, got["off"].top_p, got["off"].top_k) == (0.7, 0.8, 20)


def test_a_modes_own_wins_over_the_shared_one(tmp_path):
    got = sampling(tmp_path, "    sampling:\n      temperature: 1.0\n      top_k: 20\n"
                             "      thinking_off: {temperature: 0.7}\n")
    assert (got["on"].temperature, got["off"].temperature) == (1.0, 0.7)
    assert got["on"].top_k == got["off"].top_k == 20


def test_a_mode_entry_that_disagrees_with_the_header_names_both(tmp_path):
    header = HEADER + "# thinking_off: temperature=0.6\n"
    curve, map_file = files(tmp_path, "    sampling:\n      thinking_on: {temperature: 1.0}\n"
                                      "      thinking_off: {temperature: 0.7}\n", header)
    with pytest.raises(InvalidInput) as exc:
        read_inferencex([curve], curve_map=load_map(map_file), engine_image=IMAGE)
    (finding,) = [f for f in exc.value.findings if f.code == "flag_disagrees"]
    assert "files.c.yaml.sampling.thinking_off.temperature" in finding.message
    assert "0.6" in finding.message


def test_a_mode_entry_is_checked_by_the_specs_own_rows(tmp_path):
    (tmp_path / "map.yaml").write_text(
        "files:\n  c.yaml:\n    sampling:\n      thinking_off: {top_p: 2, colour: red}\n")
    with pytest.raises(InvalidInput) as exc:
        load_map(str(tmp_path / "map.yaml"))
    assert sorted(f.code for f in exc.value.findings) == ["top_p_out_of_range", "unknown_key"]
