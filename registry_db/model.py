"""The spec's vocabulary, in one place.

Everything here comes from ``acceptance-profiles.md``: the kinds, the thinking modes, the methods
and what each requires, the keys each mapping may hold, the category and ``copied_from`` formats,
and the small frozen dataclasses a validated document becomes. Validation, import, resolution and
export all speak these names; none of them restates a rule.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

KIND = "AcceptanceProfileSet"


class Thinking(StrEnum):
    """The thinking modes (spec: Profiles, ``thinking``)."""

    ON = "on"
    OFF = "off"


THINKING_MODES: tuple[str, ...] = tuple(t.value for t in Thinking)


class Method(StrEnum):
    """How a value was obtained (spec: the methods vocabulary); :data:`METHODS` says what each
    requires."""

    MEASURED = "measured"
    LITERATURE = "literature"
    VENDOR_SPEC = "vendor_spec"
    COPIED = "copied"
    ASSUMED = "assumed"
    NOT_CHARGED = "not_charged"


class Layer(StrEnum):
    """The layers that may state acceptance, lowest to highest (spec: Resolution).

    :mod:`registry_db.inputs.layers` says how each is read; the order here is the precedence.
    """

    REGISTRY = "registry"
    WORKLOAD = "workload"
    SCENARIO = "scenario"
    CLI = "cli"


class RefusalReason(StrEnum):
    """Why a run is refused (the contract's table, plus ``invalid_request`` for a request that
    is not well formed)."""

    NO_THINKING = "no_thinking"
    NO_CATEGORY = "no_category"
    NO_MATCH = "no_match"
    FALLBACK_NO_MATCH = "fallback_no_match"
    CONFLICT = "conflict"
    UNKNOWN_SET = "unknown_set"
    K_MISMATCH = "k_mismatch"
    INVALID_VALUE = "invalid_value"
    INVALID_REQUEST = "invalid_request"
    #: ``--emit``/``exec`` only: the engine would not realise the resolved AL exactly.
    INEXACT_HANDOFF = "inexact_handoff"


class ImportStatus(StrEnum):
    """What an import did to one set (the contract's ``status``)."""

    ADDED = "added"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    #: Only with ``--prune``: a stored set the import's files do not declare, deleted.
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A refused run as a value: why (the contract's reason code) and what to do about it.

    :func:`registry_db.resolve.resolve_many` returns these in place of answers; the one-at-a-time
    :func:`registry_db.resolve.resolve` raises :class:`registry_db.errors.ResolutionRefused`,
    which carries one.
    """

    reason: str
    message: str

    def to_json(self) -> dict[str, Any]:
        """The contract's refusal object."""
        return {"refused": {"reason": self.reason, "message": self.message}}


# --- limits --------------------------------------------------------------------------------------
# Storage limits are input rules (docs/decisions.md, "Limits"): every stored string has a length
# limit and K a maximum, checked by the validators before anything reaches a database, so that
# SQLite and PostgreSQL accept and refuse the same input with the same message. The key strings
# are bounded so that a profile-key index row stays far below PostgreSQL's btree limit of 2,704
# bytes even at 4 bytes a character: (200 + 64 + 64) x 4 + the rest < 1,400 bytes.

#: Largest K (``num_spec_tokens``). Answers carry K rates, so K sizes every answer's memory;
#: engines draft a handful of tokens per step, and 64 leaves ample room above that.
MAX_K = 64
#: Integers are stored in 32-bit columns (PostgreSQL's INTEGER).
INT_LIMIT = 2**31 - 1
#: Counts (``counts.drafts`` ...) are stored in 64-bit columns: a server's counters pass 2**31
#: tokens within days. Kept to 2**53 so that every count is exact as a JSON number and a double.
COUNT_LIMIT = 2**53
#: Export (and ingest's -o DIR) writes ``NAME.yaml`` through a temporary twin beside it,
#: ``.NAME.yaml.XXXXXXXX.tmp`` (tempfile's 8 random characters), renamed into place: the twin's
#: name is the longest a set's name makes, and file systems hold 255 bytes per name.
TEMP_PREFIX, TEMP_SUFFIX, TEMP_RANDOM = ".", ".tmp", 8
SET_FILE_SUFFIX = ".yaml"
MAX_SET_NAME_BYTES = 255 - len(TEMP_PREFIX) - len(SET_FILE_SUFFIX) - len(".") - TEMP_RANDOM \
    - len(TEMP_SUFFIX)

#: Longest text (in characters) the registry stores, by what the text is.
MAX_LENGTH: dict[str, int] = {
    "model": 200,                # indexed (the profile key)
    "speculative_method": 64,    # indexed (the profile key)
    "category": 64,              # indexed (the profile key)
    "setting_name": 128,         # indexed (a provenance's settings are keyed by name)
    "setting_value": 1_000,
    "source": 2_000,             # URLs: browsers and servers keep to about 2,000
    "run": 2_000,
    "benchmark": 200,
    "hardware": 64,
    "engine_image": 255,         # an image reference: registry, name and tag
    "rationale": 10_000,
    "caveat": 10_000,
    "copied_from": 400,          # a profile label: model/method/k<K>/thinking-<mode>/category
}


def set_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a set's name, or None: the one rule for names, held by the
    validator and by export alike (a name import accepts is one export can write as
    ``NAME.yaml``: not empty, no leading ``.``, no ``/``, ``\\`` or control character, and at
    most :data:`MAX_SET_NAME_BYTES` bytes in UTF-8)."""
    if not name:
        return "it is empty"
    if name.startswith("."):
        return "it starts with '.', which makes a hidden file"
    if "/" in name or "\\" in name or CONTROL_RE.search(name):
        return "it holds '/', '\\', NUL or another control character"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_SET_NAME_BYTES:
        return (f"it is {size} bytes long in UTF-8, and a set name is at most "
                f"{MAX_SET_NAME_BYTES}: export writes NAME.yaml through a temporary file whose "
                f"name adds {255 - MAX_SET_NAME_BYTES} bytes, within a file system's 255")
    return None


#: Characters no name may hold and no table prints raw: the C0 and C1 controls and DEL, the
#: line and paragraph separators and the bidirectional controls. Each moves a terminal's
#: cursor or runs its escape sequences, ends a line where a reader of FILE:LINE:COL lines or
#: a table does not expect one, or reorders the text after it.
CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def control_problem(what: str, text: str) -> str | None:
    """Why ``text`` cannot be ``what`` (a name, a message), or None: the one rule for names,
    held where each enters (profile sets, deployments, ``-m``)."""
    found = CONTROL_RE.search(text)
    if found is None:
        return None
    return (f"{what} holds a control character ({_escape(found)} at character "
            f"{found.start() + 1}), which a terminal would act on or a reader would split a line "
            "at; names and messages are plain one-line text")


def visible(text: str) -> str:
    """``text`` with every character :data:`CONTROL_RE` names shown as its escape (``\\x1b``,
    ``\\n``, ``\\u202e``): what tables, messages and FILE:LINE:COL lines print, so that a name
    stored before the rule, or a file's name, cannot drive the terminal or split a line."""
    return CONTROL_RE.sub(_escape, text) if CONTROL_RE.search(text) else text


def _escape(found: re.Match[str]) -> str:
    return found.group().encode("unicode_escape").decode("ascii")

@dataclass(frozen=True)
class GitOrigin:
    """Where an imported file came from in git (``registry_db.importing.git``): ``HEAD``'s
    full hash, whether the file's bytes differ from that commit's, and its path from the
    repository's root (``/``-separated). A revision records it (``revisions.git_*``)."""

    commit: str
    dirty: bool
    path: str

    def to_json(self) -> dict[str, Any]:
        return {"git_commit": self.commit, "git_dirty": self.dirty, "git_path": self.path}


#: A revision's git fields when it has no provenance (outside git, a deletion, a restore).
NO_GIT_ORIGIN = {"git_commit": None, "git_dirty": None, "git_path": None}


#: Rates must sum to AL − 1 within this, and inline quantities agree within this.
SUM_TOLERANCE = 0.01

CATEGORY_RE = re.compile(r"^[a-z0-9_-]+$")
#: ``model/method/k<K>/thinking-<mode>/category``; model and method may not contain ``/``.
COPIED_FROM_RE = re.compile(
    r"^(?P<model>[^/\s]+)/(?P<method>[^/\s]+)/k(?P<k>[1-9][0-9]*)"
    rf"/thinking-(?P<thinking>{'|'.join(THINKING_MODES)})/(?P<category>[a-z0-9_-]+)$"
)


@dataclass(frozen=True)
class MethodRule:
    """What a value-obtaining method requires of a profile (the spec's Profiles table)."""

    name: str
    description: str
    allowed_in_profile: bool = True
    requires_provenance: bool = True
    requires_rationale: bool = True
    requires_copied_from: bool = False
    requires_measurement: bool = False  # hardware, engine_image and sampling in the provenance


METHODS: dict[str, MethodRule] = {
    str(m.name): m
    for m in (
        MethodRule(Method.MEASURED, "Measured on real hardware by a benchmark run.",
                   requires_rationale=False, requires_measurement=True),
        MethodRule(Method.LITERATURE, "Read from a paper or a published report."),
        MethodRule(Method.VENDOR_SPEC, "Stated by a vendor's documentation."),
        MethodRule(Method.COPIED, "Copied from another profile; copied_from names it.",
                   requires_copied_from=True),
        MethodRule(Method.ASSUMED, "Assumed without a source; the rationale explains it.",
                   requires_provenance=False),
        MethodRule(Method.NOT_CHARGED, "Not a value: speculative decoding is not charged.",
                   allowed_in_profile=False),
    )
}
PROFILE_METHODS: tuple[str, ...] = tuple(n for n, m in METHODS.items() if m.allowed_in_profile)

# The keys each mapping may hold, in the order the spec lists them (export writes this order).
SET_KEYS: tuple[str, ...] = ("kind", "name", "caveats", "profiles")
PROFILE_KEY_FIELDS: tuple[str, ...] = (
    "model", "speculative_method", "num_spec_tokens", "thinking", "category",
)
PROFILE_KEYS: tuple[str, ...] = PROFILE_KEY_FIELDS + (
    "acceptance_length", "per_position_rates", "counts", "method", "provenance", "rationale",
    "copied_from",
)
#: ``counts`` (contract, third round: a registry_db extension of the spec).
COUNTS_KEYS: tuple[str, ...] = ("drafts", "draft_tokens", "accepted_tokens",
                                "accepted_per_position")
PROVENANCE_KEYS: tuple[str, ...] = (
    "source", "run", "benchmark", "prompts", "hardware", "engine_image", "tp", "sampling",
    "settings",
)
SAMPLING_KEYS: tuple[str, ...] = ("temperature", "top_p", "top_k", "max_tokens")
INLINE_KEYS: tuple[str, ...] = (
    "num_spec_tokens", "acceptance_length", "acceptance_rate", "per_position_rates", "source",
)
PIN_KEYS: tuple[str, ...] = ("profiles", "value", "fallback_category")
WORKLOAD_KEYS: tuple[str, ...] = ("thinking", "category", "acceptance")

def profile_label(model: str, method: str, k: int, thinking: str, category: str) -> str:
    """The spec's name for one profile: ``model/method/k<K>/thinking-<mode>/category``."""
    return f"{model}/{method}/k{k}/thinking-{thinking}/{category}"


def setting_type(value: Any) -> str:
    """The stored type name of a setting's scalar value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def setting_text(value: Any) -> str:
    """A setting's value as stored text; :func:`setting_value` reads it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def setting_value(text: str, type_: str) -> Any:
    """The inverse of :func:`setting_text`."""
    if type_ == "boolean":
        return text == "true"
    if type_ == "integer":
        return int(text)
    if type_ == "number":
        return float(text)
    return text


@dataclass(frozen=True)
class Sampling:
    """``provenance.sampling``: the decoding configuration of a measurement."""

    temperature: float
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Provenance:
    """Where a value was measured or read. One database row per distinct provenance."""

    source: str
    run: str | None = None
    benchmark: str | None = None
    prompts: int | None = None
    hardware: str | None = None
    engine_image: str | None = None
    tp: int | None = None
    sampling: Sampling | None = None
    #: ``(name, value)`` pairs in file order; values are str, int, float or bool.
    settings: tuple[tuple[str, Any], ...] = ()

    def canonical(self) -> dict[str, Any]:
        """A JSON-able form that is equal exactly when two provenances are the same content."""
        out: dict[str, Any] = {k: getattr(self, k) for k in PROVENANCE_KEYS[:7]}
        out["sampling"] = None if self.sampling is None else {
            k: getattr(self.sampling, k) for k in SAMPLING_KEYS
        }
        out["settings"] = sorted([n, setting_type(v), setting_text(v)] for n, v in self.settings)
        return out

    def content_hash(self) -> str:
        """SHA-256 of :meth:`canonical`: the provenance's identity in the database."""
        return _hash(self.canonical())


class Keyed:
    """The profile key and its label, for anything with the five key fields."""

    model: str
    speculative_method: str
    num_spec_tokens: int
    thinking: str
    category: str

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        """The profile key (without the set)."""
        return (self.model, self.speculative_method, self.num_spec_tokens, self.thinking,
                self.category)

    @property
    def label(self) -> str:
        """The spec's ``model/method/k<K>/thinking-<mode>/category`` name."""
        return profile_label(*self.key)


@dataclass(frozen=True)
class Uncertainty:
    """How sure a value measured from counts is: the standard error of its AL over ``drafts``
    verification steps; ``exact`` False when the variance is the largest the totals allow."""

    drafts: int
    stderr: float
    exact: bool
    #: The counts' own mean, 1 + accepted / drafts: the centre the error is about (a stored AL
    #: may be that mean rounded); None where only the error is known.
    mean: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"drafts": self.drafts, "stderr": self.stderr, "exact": self.exact}


def z_score(old: float, old_stderr: float, new: float, new_stderr: float) -> float | None:
    """How many combined standard errors ``new`` lies from ``old``: (new − old) /
    √(old_stderr² + new_stderr²); None when both errors are 0 (no spread to measure by)."""
    spread = math.hypot(old_stderr, new_stderr)
    return None if spread == 0 else (new - old) / spread


@dataclass(frozen=True)
class Counts:
    """The raw counts a profile's AL was computed from (contract, third round: a registry_db
    extension of the spec). ``accepted_per_position[i]`` counts the steps that accepted at least
    i + 1 drafts."""

    drafts: int
    draft_tokens: int
    accepted_tokens: int
    accepted_per_position: tuple[int, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The contract's ``counts`` mapping (``accepted_per_position`` only when known)."""
        out: dict[str, Any] = {"drafts": self.drafts, "draft_tokens": self.draft_tokens,
                               "accepted_tokens": self.accepted_tokens}
        if self.accepted_per_position is not None:
            out["accepted_per_position"] = list(self.accepted_per_position)
        return out

    def uncertainty(self, k: int) -> Uncertainty:
        """The standard error of AL = 1 + X̄ over the drafting steps, X the drafts a step
        accepts: with the per-position counts a_i, Var X = Σ (2i − 1) a_i / D − μ² exactly;
        with totals only, the largest variance they allow, μ (K − μ), which at K = 1 (X is 0
        or 1) is the variance itself. Its centre is the counts' own mean (:attr:`mean`)."""
        d = self.drafts
        mu = self.accepted_tokens / d
        if self.accepted_per_position is not None:
            second = sum((2 * i - 1) * a for i, a in enumerate(self.accepted_per_position, 1))
            var = second / d - mu * mu
        else:
            var = mu * (k - mu)
        return Uncertainty(d, math.sqrt(max(var, 0.0) / d), self.exact(k), self.mean)

    def exact(self, k: int) -> bool:
        """Whether the counts give the variance exactly: the per-position counts are stored, or
        K is 1 (a step accepts 0 or 1 draft, so μ (1 − μ) is its variance)."""
        return self.accepted_per_position is not None or k == 1

    @property
    def mean(self) -> float:
        """1 + accepted_tokens / drafts, the nearest float: the AL the counts measured."""
        return float(1 + Fraction(self.accepted_tokens, self.drafts))


@dataclass(frozen=True)
class Profile(Keyed):
    """One validated profile of a set."""

    model: str
    speculative_method: str
    num_spec_tokens: int
    thinking: str
    category: str
    acceptance_length: float
    method: str
    per_position_rates: tuple[float, ...] | None = None
    provenance: Provenance | None = None
    rationale: str | None = None
    copied_from: str | None = None
    #: The counts the value was computed from (None: not known).
    counts: Counts | None = None

    def canonical(self) -> dict[str, Any]:
        """A JSON-able form used for the set's content hash (``counts`` only when known, so a
        set without them keeps the hash it had before counts existed)."""
        out = {
            "key": list(self.key),
            "acceptance_length": self.acceptance_length,
            "method": self.method,
            "per_position_rates": None if self.per_position_rates is None
            else list(self.per_position_rates),
            "provenance": None if self.provenance is None else self.provenance.canonical(),
            "rationale": self.rationale,
            "copied_from": self.copied_from,
        }
        if self.counts is not None:
            out["counts"] = self.counts.to_json()
        return out


@dataclass(frozen=True)
class ProfileSet:
    """A validated profile set, as one file states it."""

    name: str
    caveats: tuple[str, ...]
    profiles: tuple[Profile, ...]
    file: str | None = None

    def content_hash(self) -> str:
        """SHA-256 of the set's meaning (not its bytes): comments and layout do not count.

        The digest of :func:`_canonical_json` of ``{"name", "caveats", "profiles": [each
        profile's canonical form]}``; each profile's text is :func:`_profile_json`'s (the same
        text; docs/decisions.md, Speed, says why it is built by template).
        """
        provenances: dict[int, str] = {}  # by object: profiles citing one share its text
        pieces = [_profile_json(p, provenances) for p in self.profiles]
        return _digest(f'{{"caveats":{_canonical_json(list(self.caveats))},"name":'
                       f'{_canonical_json(self.name)},"profiles":[{",".join(pieces)}]}}')


@dataclass(frozen=True)
class InlineValue:
    """A workload's, scenario's or command line's stated acceptance (spec: Inline values)."""

    num_spec_tokens: int
    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position_rates: tuple[float, ...] | None = None
    source: str | None = None


@dataclass(frozen=True)
class Pin:
    """A scenario's ``acceptance`` pin (spec: Scenario pin)."""

    profiles: str | None = None
    value: InlineValue | None = None
    fallback_category: str | None = None


def _canonical_json(obj: Any) -> str:
    """The text content hashes digest: sorted keys, no spaces, non-ASCII kept."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(text: str) -> str:
    # Imported here: every command loads this module, and hashlib's start-up (OpenSSL's, mostly)
    # serves only the import and export.
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _hash(obj: Any) -> str:
    return _digest(_canonical_json(obj))


_text_json = json.encoder.encode_basestring  # json's own (C) string writer
_float_json = float.__repr__  # what json writes for a finite float


def _profile_json(p: Profile, provenances: dict[int, str]) -> str:
    """``_canonical_json(p.canonical())``: by template when the fields have the types a checked
    profile has (text, an int K, finite floats), else by the encoder; ``provenances`` keeps
    each provenance object's text."""
    pv, rates, al, k = p.provenance, p.per_position_rates, p.acceptance_length, p.num_spec_tokens
    if pv is None:
        shown = "null"
    elif id(pv) in provenances:
        shown = provenances[id(pv)]
    else:
        shown = provenances[id(pv)] = _canonical_json(pv.canonical())
    try:  # a value of another type (an int AL, a None model) is refused by json's functions
        # A sum that overflows only sends a good profile the encoder's way; json writes a
        # bool K as true, so only an int takes the template.
        if type(k) is not int or not math.isfinite(al + (sum(rates) if rates else 0.0)):
            raise TypeError
        listed = "null" if rates is None else f'[{",".join(map(_float_json, rates))}]'
        copied = "null" if p.copied_from is None else _text_json(p.copied_from)
        why = "null" if p.rationale is None else _text_json(p.rationale)
        counts = "" if p.counts is None else f'"counts":{_canonical_json(p.counts.to_json())},'
        return (f'{{"acceptance_length":{_float_json(al)},"copied_from":{copied},{counts}"key":['
                f'{_text_json(p.model)},{_text_json(p.speculative_method)},{int.__repr__(k)},'
                f'{_text_json(p.thinking)},{_text_json(p.category)}],"method":'
                f'{_text_json(p.method)},"per_position_rates":{listed},"provenance":{shown},'
                f'"rationale":{why}}}')
    except TypeError:
        return _canonical_json(p.canonical())
