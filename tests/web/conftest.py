"""The web tests' registries and servers: generated SQLite registries (several sets, keys two
sets hold, categories with and without profiles, stored and derived rates, values that were not
measured) and ``registry serve`` on a free local port, as a user starts it."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry_db.resolve.rates import min_variance_rates
from tests.helpers import run_cli

#: The generated registries' vocabulary (what the resolve comparisons sweep over).
MODELS = ("model-a", "model-b")
METHODS = ("mtp", "dspark")
KS = (1, 2, 3)
THINKING = ("on", "off")
CATEGORIES = ("coding", "chat", "math")
SETS = ("alpha", "beta", "gamma")


def generated_sets(seed: int) -> dict[str, str]:
    """Three sets' YAML: each holds a random third of the keys, so that some keys are held by
    two or three sets (conflicts) and some categories are missing (fallbacks)."""
    rng = random.Random(seed)
    out = {}
    for name in SETS:
        lines = ["kind: AcceptanceProfileSet", f"name: {name}", "profiles:"]
        for model in MODELS:
            for method in METHODS:
                for k in KS:
                    for thinking in THINKING:
                        for category in CATEGORIES:
                            if rng.random() < 0.3:
                                lines += _profile(rng, model, method, k, thinking, category)
        out[name] = "\n".join(lines) + "\n"
    return out


def _profile(rng: random.Random, model: str, method: str, k: int, thinking: str,
             category: str) -> list[str]:
    al = round(rng.uniform(1, k + 1), 2)
    how = rng.choice(("measured", "measured", "copied", "literature", "assumed"))
    lines = [f"  - model: {model}", f"    speculative_method: {method}",
             f"    num_spec_tokens: {k}", f'    thinking: "{thinking}"',
             f"    category: {category}", f"    acceptance_length: {al}", f"    method: {how}"]
    if rng.random() < 0.3:
        rates = ", ".join(repr(r) for r in min_variance_rates(al, k))
        lines.append(f"    per_position_rates: [{rates}]")
    if how == "measured" and rng.random() < 0.5:  # raw counts that give this AL
        drafts = 1000
        lines.append(f"    counts: {{drafts: {drafts}, draft_tokens: {k * drafts}, "
                     f"accepted_tokens: {round((al - 1) * drafts)}}}")
    if how != "measured":
        lines.append("    rationale: generated for the web tests")
    if how == "copied":
        lines.append(f"    copied_from: {model}-base/{method}/k{k}/thinking-{thinking}/{category}")
    if how != "assumed":
        lines += ["    provenance:", f"      source: https://example.org/{model}/{method}.yaml"]
        if how == "measured":
            lines += [f"      hardware: {rng.choice(('b300', 'h200'))}",
                      "      engine_image: vllm/vllm-openai:v0.31.0",
                      "      sampling: {temperature: 1.0}"]
    return lines


def make_registry(folder: Path, seed: int) -> Path:
    """An SQLite registry file holding :func:`generated_sets` (``seed``), imported as a user
    does (``registry import``)."""
    sets = folder / f"sets-{seed}"
    sets.mkdir(parents=True)
    for name, text in generated_sets(seed).items():
        (sets / f"{name}.yaml").write_text(text, encoding="utf-8")
    path = folder / f"registry-{seed}.db"
    result = run_cli("-d", str(path), "import", str(sets))
    assert result.exit_code == 0, result.output + result.stderr
    return path


@pytest.fixture(scope="session")
def registry_file(tmp_path_factory) -> Path:
    """One generated registry for the session's servers (none of them writes it)."""
    return make_registry(tmp_path_factory.mktemp("web"), seed=7)


def free_port() -> int:
    """A port nothing on 127.0.0.1 listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``registry serve`` in its own process; ``url`` is where it answers."""

    def __init__(self, path: Path, port: int):
        self.path, self.port = path, port
        self.url = f"http://127.0.0.1:{port}"
        self.log = path.parent / f"serve-{port}.log"
        self._log = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "registry_db", "-d", str(path), "serve", "--port", str(port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"registry serve exited {self.process.returncode}: "
                                     f"{self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/versions.json", timeout=5):
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"registry serve did not answer in {timeout} s: "
                             f"{self.log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


@pytest.fixture(scope="session")
def server(registry_file) -> Iterator[Server]:
    """``registry -d FILE serve --port PORT`` on a free port of 127.0.0.1."""
    running = Server(registry_file, free_port())
    try:
        running.wait()
        yield running
    finally:
        running.stop()
