"""``eval "$(registry resolve ... --emit ENGINE --shell)"`` in a real bash: a refusal (or any
other failure) makes the ``eval`` fail, so ``set -e`` stops before the engine starts, while an
interactive shell goes on with a non-zero status; an accepted run's text is valid shell for every
engine, vLLM's and ATOM's included."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import DSV, GLM, build_seed

OFF = " ".join([*DSV, "--thinking", "off", "--category", "coding"])
REFUSED = " ".join([*GLM, "--category", "chat"])      # no_match


@pytest.fixture
def bash(shared_url, tmp_path):
    """Runs a bash script in which ``registry`` is this checkout's, on the seeded registry
    (shared with the other tests that only read it)."""
    db_url = shared_url("seed", build_seed)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "registry"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m registry_db -d "{db_url}" "$@"\n')
    wrapper.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8"}

    def run(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)

    return run


def test_set_e_stops_at_a_refusal(bash):
    done = bash(f'set -euo pipefail; eval "$(registry resolve {REFUSED} --emit sglang --shell)"; '
                'echo ran')
    assert done.returncode != 0 and "ran" not in done.stdout
    assert "refused (no_match)" in done.stderr


def test_an_interactive_shell_goes_on_with_a_non_zero_status(bash):
    done = bash(f'eval "$(registry resolve {REFUSED} --emit sglang --shell)"; echo "status $?"; '
                'echo "${SGLANG_SIMULATE_ACC_LEN-unset}"')
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["status 1", "unset"]


@pytest.mark.parametrize("args, code", [
    (f"{REFUSED} --emit sglang", 1),                                   # refused
    (f"{' '.join(GLM)} --category coding --acceptance-length 1 --emit trtllm", 1),  # inexact
    (f"{OFF} --emit hf", 2),                                           # usage: no such engine
    (f"{' '.join(DSV)} --workload missing.yaml --emit sglang", 1),     # unreadable input
    (f"{OFF} --emit vllm --into '{{\"num_speculative_tokens\": 4}}'", 1),  # K conflict
    (f"{OFF} --emit vllm --into '{{nope'", 2),                          # usage: not JSON
    (f"{OFF} --emit sglang", 3),                                       # no registry
])
def test_every_failure_makes_eval_fail(bash, args, code):
    # The last case runs on a registry that is not there (the database's exit 3).
    command = ("registry resolve" if code != 3 else
               f'"{sys.executable}" -m registry_db -d /nonexistent/registry.db resolve')
    direct = bash(f"{command} {args} --shell")
    assert direct.returncode == code, direct.stderr
    assert direct.stdout.splitlines()[-1] == "false"
    done = bash(f'set -e; eval "$({command} {args} --shell)"; echo ran')
    assert done.returncode != 0 and "ran" not in done.stdout


def test_an_accepted_run_exports_for_the_engine(bash):
    done = bash(f'set -euo pipefail; eval "$(registry resolve {OFF} --emit sglang --shell)"; '
                'printenv SGLANG_SIMULATE_ACC_LEN SGLANG_SIMULATE_ACC_METHOD')
    assert (done.returncode, done.stdout) == (0, "4.07\nmatch-expected\n"), done.stderr


def test_vllm_and_atom_shell_text_is_a_variable_for_the_command_line(bash):
    """Not one quoted word that eval would run: SPECULATIVE_CONFIG for
    --speculative-config "$SPECULATIVE_CONFIG", SPECULATIVE_ARGS for $SPECULATIVE_ARGS."""
    show = f"{sys.executable} -c 'import sys; print(sys.argv[1:])'"
    done = bash(f'set -euo pipefail; eval "$(registry resolve {OFF} --emit vllm --shell)"; '
                f'{show} --speculative-config "$SPECULATIVE_CONFIG"; '
                f'eval "$(registry resolve {OFF} --emit atom --shell)"; {show} $SPECULATIVE_ARGS; '
                'printenv SPECULATIVE_CONFIG || echo "not exported"')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['--speculative-config', '{\"num_speculative_tokens\": 5, \"rejection_sample_method\": "
        "\"synthetic\", \"synthetic_acceptance_length\": 4.07}']",
        "['--spec-decode-acceptance-length', '4.07']",
        "not exported"]
