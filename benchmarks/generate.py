"""Deterministic, realistic registries for the benchmarks, from a thousand to a million profiles.

A registry here is ``sets`` profile-set files of ``per_set`` profiles each. Profile keys are
numbered: key ``j`` decomposes (mixed radix) into category, thinking mode, K, speculative method
and model, so a set holds a contiguous run of keys the way a team's sweep does (one model and
method at a time, every K, thinking mode and category). Each set is flavoured by a chip, and:

- the first ``overlap`` keys of set ``i``'s own range are also held by set ``i + 1`` (the same
  sweep re-run on another chip): keys two sets both match, which a resolver must refuse;
- so that each set still holds ``per_set`` profiles, the last ``overlap`` keys of set ``i``'s
  range (``i > 0``) are held by no set: natural misses;
- measured and copied profiles share one provenance per (model, method, K, chip), literature
  and vendor profiles cite one of a few papers shared by every file, assumed ones have none;
- every other file writes shared provenances once with an anchor and refers to them by alias,
  the rest repeat them inline (the importer dedupes by content either way);
- about a quarter of the profiles carry valid per-position rates (K entries, non-increasing,
  in [0, 1], summing to AL - 1).

Files are written one at a time from a per-file ``random.Random`` seeded by ``(seed, index)``,
so any file can be regenerated alone and a million profiles never sit in memory. The YAML is
written as text (the spec's layout) rather than through a dumper, which would dominate the time.

    python benchmarks/generate.py OUT_DIR --profiles 100000 --files 200 [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CATEGORIES = ("coding", "math", "chat", "summarization", "rag", "agentic", "translation",
              "qa", "creative", "extraction", "reasoning", "tool-use")
THINKING = ("off", "on")
MAX_K = 8
SPEC_METHODS = ("mtp", "eagle3", "dspark", "ngram", "medusa")
FAMILIES = ("deepseek-v4", "glm-5", "qwen3", "llama-4", "kimi-k2", "gpt-oss", "mistral-l3",
            "minimax-m2")
CHIPS = ("b300", "b200", "h200", "h100", "mi355x", "mi300x", "gb200", "tpu-v6e")
PAPERS = tuple(f"https://arxiv.org/abs/25{m:02d}.{n:05d}" for m in range(1, 5)
               for n in (1234, 4321, 7777, 9001))
#: (method, cumulative weight): most values are measured, a few are stated without a source.
METHOD_MIX = (("measured", 0.60), ("copied", 0.72), ("literature", 0.87), ("vendor_spec", 0.92),
              ("assumed", 1.0))
RATES_SHARE = 0.25
#: Per set: keys per (model, method), i.e. one sweep over K, thinking and category.
SWEEP = len(CATEGORIES) * len(THINKING) * MAX_K


@dataclass(frozen=True)
class Layout:
    """The shape of a generated registry; enough to rebuild any key, set or request."""

    sets: int
    per_set: int
    seed: int = 0
    overlap: int = 0

    @property
    def profiles(self) -> int:
        """How many profiles the files hold in all."""
        return self.sets * self.per_set

    def set_name(self, i: int) -> str:
        """The name (and file stem) of set ``i``."""
        return f"{CHIPS[i % len(CHIPS)]}-sweep-{i:05d}"

    def set_keys(self, i: int) -> list[int]:
        """The key numbers set ``i`` holds, in file order."""
        if i == 0:  # nothing to borrow: the first set holds its whole range
            return list(range(self.per_set))
        own = range(i * self.per_set, (i + 1) * self.per_set - self.overlap)
        borrowed = range((i - 1) * self.per_set, (i - 1) * self.per_set + self.overlap)
        return [*own, *borrowed]

    def holders(self, j: int) -> list[int]:
        """The sets that hold key ``j`` (none, one, or two at an overlap)."""
        i, off = divmod(j, self.per_set)
        if i >= self.sets or (i and off >= self.per_set - self.overlap):
            return []
        return [i, i + 1] if off < self.overlap and i + 1 < self.sets else [i]


def default_layout(profiles: int, files: int, seed: int = 0) -> Layout:
    """``profiles`` spread evenly over ``files`` sets, 2 % of each set's keys overlapping."""
    per_set = max(1, profiles // files)
    return Layout(sets=files, per_set=per_set, seed=seed, overlap=per_set // 50)


def key_of(j: int) -> tuple[str, str, int, str, str]:
    """Key number ``j`` as (model, speculative_method, K, thinking, category)."""
    j, c = divmod(j, len(CATEGORIES))
    j, t = divmod(j, len(THINKING))
    j, k = divmod(j, MAX_K)
    m, s = divmod(j, len(SPEC_METHODS))
    fam, gen = divmod(m, len(FAMILIES))
    model = f"{FAMILIES[gen % len(FAMILIES)]}.{fam}-{('flash', 'pro', 'mini')[fam % 3]}"
    return model, SPEC_METHODS[s], k + 1, THINKING[t], CATEGORIES[c]


def label(key: tuple[str, str, int, str, str]) -> str:
    """The spec's ``model/method/k<K>/thinking-<mode>/category``."""
    return f"{key[0]}/{key[1]}/k{key[2]}/thinking-{key[3]}/{key[4]}"


def rates_for(rng: random.Random, k: int) -> tuple[list[float], float]:
    """Valid per-position rates for K and the AL they imply: a geometric-ish decay."""
    alpha = rng.uniform(0.45, 0.95)
    rates, p = [], 1.0
    for _ in range(k):
        p *= min(1.0, alpha * rng.uniform(0.97, 1.03))
        rates.append(round(p, 4))
    for n in range(1, k):  # rounding and jitter must not make them rise
        rates[n] = min(rates[n], rates[n - 1])
    return rates, round(1.0 + sum(rates), 4)


def _provenance(key, chip: str) -> list[str]:
    model, method, k = key[0], key[1], key[2]
    run = 20_000_000_000 + (hash_text(f"{model}/{method}/{k}/{chip}") % 9_999_999_999)
    lines = [
        f"source: https://github.com/example-org/acceptance/blob/main/{model}/{method}.yaml",
        f"run: https://github.com/example-org/acceptance/actions/runs/{run}",
        "benchmark: SPEED-Bench Qualitative",
        f"prompts: {80 + 8 * k}",
        f"hardware: {chip}",
        f"engine_image: vllm/vllm-openai:v0.{20 + k % 5}.0",
        f"tp: {(1, 2, 4, 8)[k % 4]}",
        "sampling: {temperature: 1.0, top_p: 0.95, max_tokens: 4096}" if k % 2
        else "sampling: {temperature: 0.0}",
    ]
    if method in ("dspark", "eagle3"):
        lines += ["settings:", "  draft_sample_method: probabilistic",
                  f"  enable_adaptive_verification: {'true' if k > 4 else 'false'}",
                  f"  draft_tp: {1 if k < 4 else 2}"]
    return lines


def _paper(n: int) -> list[str]:
    return [f"source: {PAPERS[n]}", "benchmark: MT-Bench", f"prompts: {80 * (1 + n % 3)}"]


def hash_text(text: str) -> int:
    """A stable (PYTHONHASHSEED-independent) integer from a string."""
    h = 2166136261
    for ch in text.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


def set_text(layout: Layout, i: int) -> str:
    """The YAML text of set ``i``."""
    rng = random.Random(f"{layout.seed}/{i}")
    chip = CHIPS[i % len(CHIPS)]
    anchors = i % 2 == 0
    seen: set[str] = set()
    out = ["kind: AcceptanceProfileSet", f"name: {layout.set_name(i)}"]
    caveats = [f"Measured on {chip.upper()}; reuse on another part is recorded by the resolver.",
               "Sweeps every K from 1 to 8, both thinking modes and twelve categories.",
               "Values older than the engine image's release are not refreshed."][:i % 4]
    if caveats:
        out.append("caveats:")
        out.extend(f"  - {c}" for c in caveats)
    out.append("profiles:")
    for j in layout.set_keys(i):
        key = key_of(j)
        model, spec, k, thinking, category = key
        roll = rng.random()
        method = next(m for m, w in METHOD_MIX if roll < w)
        if rng.random() < RATES_SHARE:
            rates, al = rates_for(rng, k)
        else:
            rates, al = None, round(1.0 + k * rng.uniform(0.3, 0.9) ** (1 + k / 8), 3)
        out += [f"  - model: {model}", f"    speculative_method: {spec}",
                f"    num_spec_tokens: {k}", f'    thinking: "{thinking}"',
                f"    category: {category}", f"    acceptance_length: {al!r}"]
        if rates is not None:
            out.append(f"    per_position_rates: [{', '.join(repr(r) for r in rates)}]")
        out.append(f"    method: {method}")
        if method == "copied":
            donor = (f"{FAMILIES[(j // SWEEP) % len(FAMILIES)]}.base-pro", spec, k, thinking,
                     category)
            out.append(f"    copied_from: {label(donor)}")
        if method != "measured":
            out.append(f'    rationale: "{method} value for {category}; replace with a run on '
                       f'{chip}."')
        if method in ("measured", "copied"):
            body, name = _provenance(key, chip), f"p{j // (len(CATEGORIES) * len(THINKING))}"
        elif method in ("literature", "vendor_spec"):
            n = (j // SWEEP) % len(PAPERS)
            body, name = _paper(n), f"paper{n}"
        else:
            continue
        if anchors and name in seen:
            out.append(f"    provenance: *{name}")
            continue
        out.append(f"    provenance: &{name}" if anchors else "    provenance:")
        seen.add(name)
        out.extend(f"      {line}" for line in body)
    return "\n".join(out) + "\n"


def write_registry(layout: Layout, out_dir: Path) -> list[Path]:
    """Write every set of ``layout`` as ``OUT_DIR/<set name>.yaml``; the files, in set order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(layout.sets):
        path = out_dir / f"{layout.set_name(i)}.yaml"
        path.write_text(set_text(layout, i), encoding="utf-8")
        paths.append(path)
    return paths


def requests(layout: Layout, n: int, seed: int = 1) -> Iterator[dict]:
    """``n`` resolution requests in the contract's ``--batch`` line form, deterministic.

    About 80 % hit one set (a key only one set holds, or an overlapping key with ``sets``
    naming one of its holders), 10 % miss (``no_match``), and 10 % ask for a category no set
    holds with a ``fallback_category`` pin that hits.
    """
    rng = random.Random(f"requests/{layout.seed}/{seed}")
    total = layout.sets * layout.per_set

    def held_key() -> tuple[int, list[int]]:
        while True:
            j = rng.randrange(total)
            if held := layout.holders(j):
                return j, held

    for _ in range(n):
        roll = rng.random()
        j, held = held_key()
        model, spec, k, thinking, category = key_of(j)
        req: dict = {"model": model, "method": spec, "k": k, "thinking": thinking,
                     "category": category}
        if roll < 0.8:
            if len(held) > 1 or rng.random() < 0.1:
                req["sets"] = [layout.set_name(rng.choice(held))]
        elif roll < 0.9:
            req["category"] = "unseen-category"
        else:
            req["category"] = "unseen-category"
            req["pin"] = {"fallback_category": category}
            if len(held) > 1:
                req["sets"] = [layout.set_name(rng.choice(held))]
        yield req


def hit_requests(layout: Layout, n: int, seed: int = 7) -> Iterator[dict]:
    """``n`` requests for keys exactly one set holds, with no sets list and no fallback."""
    rng = random.Random(f"hits/{layout.seed}/{seed}")
    total = layout.sets * layout.per_set
    made = 0
    while made < n:
        j = rng.randrange(total)
        if len(layout.holders(j)) == 1:
            model, spec, k, thinking, category = key_of(j)
            made += 1
            yield {"model": model, "method": spec, "k": k, "thinking": thinking,
                   "category": category}



def registry_folder(work: Path, profiles: int, files: int) -> tuple[Layout, Path]:
    """A generated registry under ``work``, written once and reused by every backend."""
    layout = default_layout(profiles, files)
    folder = work / f"registry-{profiles}-{files}"
    done = folder / ".complete"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        start = time.perf_counter()
        write_registry(layout, folder)
        done.write_text("")
        print(f"  generated {layout.profiles:,} profiles in {files} files "
              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return layout, folder

def main(argv: list[str] | None = None) -> int:
    """Command line: write a registry of ``--profiles`` profiles in ``--files`` files."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--profiles", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    layout = default_layout(args.profiles, args.files, args.seed)
    paths = write_registry(layout, args.out_dir)
    print(f"wrote {layout.profiles} profiles in {len(paths)} files to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
