"""Deployment files (registry_db.inputs.deployment): the pools and their speculation, every
problem at once as FILE:LINE:COL: PATH: MESSAGE. No database."""

from __future__ import annotations

import pytest

from registry_db.errors import InvalidInput
from registry_db.inputs.deployment import Deployment, Pool, check_deployment, load_deployment


def load(tmp_path, text: str) -> Deployment:
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return load_deployment(path)


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as info:
        load_deployment(path)
    return [f.render().replace(str(path), "deploy.yaml") for f in info.value.findings]


def test_pools_with_and_without_speculation(tmp_path):
    deployment = load(tmp_path, (
        "pools:\n"
        "  - name: prefill\n"
        "  - name: decode\n"
        "    engine:\n"
        "      image: vllm/vllm-openai:v0.31.0\n"
        "      speculative: {method: dspark, num_spec_tokens: 5}\n"
        "  - name: eager\n"
        "    engine: {speculative: null}\n"))
    assert deployment.pools == (Pool("prefill"), Pool("decode", "dspark", 5), Pool("eager"))
    assert deployment.speculating == (Pool("decode", "dspark", 5),)


def test_one_pool_may_be_written_without_pools(tmp_path):
    text = "engine:\n  speculative:\n    method: mtp\n    num_spec_tokens: 3\n"
    assert load(tmp_path, text).pools == (Pool("default", "mtp", 3),)
    assert load(tmp_path, "name: decode\n" + text).pools == (Pool("decode", "mtp", 3),)
    assert load(tmp_path, "name: cpu\n").speculating == ()


def test_every_problem_at_once_with_its_place(tmp_path):
    assert problems(tmp_path, (
        "pools:\n"
        "  - name: a\n"
        "    engine:\n"
        "      speculative: {method: '', num_spec_tokens: 0, k: 1}\n"
        "  - name: b\n"
        "    engine: {speculative: {method: mtp, num_spec_tokens: 2.0}}\n"
        "  - nme: c\n"
        "  - 7\n")) == [
        "deploy.yaml:4:53: pools[0].engine.speculative.k: unknown key 'k'; known keys: method, "
        "num_spec_tokens",
        "deploy.yaml:4:29: pools[0].engine.speculative.method: method is empty; give it a value "
        "or remove the key",
        "deploy.yaml:4:50: pools[0].engine.speculative.num_spec_tokens: num_spec_tokens is 0; a "
        "pool that speculates proposes at least 1 token per step (leave out engine.speculative "
        "if it does not)",
        "deploy.yaml:6:58: pools[1].engine.speculative.num_spec_tokens: num_spec_tokens must be "
        "an integer, got a number 2.0; write 2, without the decimal point",
        "deploy.yaml:7:5: pools[2].nme: unknown key 'nme'; did you mean 'name'?",
        "deploy.yaml:7:5: pools[2].name: name is required; give the pool a name (a string), "
        "which the answer lists it by",
        "deploy.yaml:8:5: pools[3]: a pool must be a mapping, got an integer",
    ]


def test_pool_names_are_distinct(tmp_path):
    assert problems(tmp_path, "pools:\n  - name: a\n  - name: a\n") == [
        "deploy.yaml:3:11: pools[1].name: pool name 'a' is taken by pools[0]; each pool needs "
        "its own name, which the answer lists it by"]


@pytest.mark.parametrize("text, needle", [
    ("pools: []\n", "pools: pools is empty"),
    ("pools: {a: 1}\n", "pools: pools must be a list, got a mapping"),
    ("- name: a\n", "(document): a deployment must be a mapping, got a list"),
    ("pools:\n  - name: a\nextra: 1\n", "extra: unknown key 'extra'; known keys: pools"),
    ("name: a\nengine:\n  speculative: {method: x}\n",
     "engine.speculative.num_spec_tokens: num_spec_tokens is required"),
    ("name: a\nengine: 5\n", "engine: engine must be a mapping, got an integer"),
])
def test_malformed_deployments(tmp_path, text, needle):
    assert any(needle in p for p in problems(tmp_path, text)), problems(tmp_path, text)


def test_a_json_object_is_checked_the_same_way_with_key_paths():
    deployment, findings = check_deployment({"pools": [{"name": "d", "engine": {
        "speculative": {"method": "mtp", "num_spec_tokens": 3}}}]}, "", "deployment")
    assert deployment == Deployment((Pool("d", "mtp", 3),)) and findings == []
    deployment, findings = check_deployment({"pools": [{"engine": {}}]}, "", "deployment")
    assert deployment is None
    assert [(f.path, f.code) for f in findings] == [("deployment.pools[0].name", "missing_key")]
