"""What every counter source shares: the run's facts, reading an input, JSON inputs with their
lines, the exact arithmetic, and the measured profile with its counts (Prometheus scrapes are
:mod:`registry_db.sources.counters.scrape`'s).

An input is a file, ``-`` (stdin) or an ``http(s)://`` URL, read whole within
:data:`MAX_INPUT_BYTES`; a fetch finishes within :data:`FETCH_TIMEOUT` in all, follows
redirects only to ``http(s)://``, and a URL is named everywhere (messages, the recorded
source) without its secrets (:func:`redact`). Counts stay exact (fractions of the counts) until
the profile is built: AL and the rates are the nearest floats of the exact values, rounded only
when asked.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from registry_db.errors import Finding, InvalidInput, UsageError
from registry_db.model import (
    MAX_K,
    SUM_TOLERANCE,
    Counts,
    Profile,
    ProfileSet,
    Provenance,
    Sampling,
)
from registry_db.sources.ingested import Ingested, rendered, safe_name, spec_problems

#: The most an input may hold: a scrape of a server with many engines is a few MB.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: How long a fetch of an ``http(s)://`` input may take in all (connect, headers, body), in
#: seconds: a deadline, not a per-read timeout, so a server that drips bytes cannot hold it.
FETCH_TIMEOUT = 30.0
#: Query parameters whose values are secrets (compared lower-cased, ``-`` as ``_``).
SECRET_PARAMS = frozenset({
    "password", "passwd", "pass", "pwd", "token", "access_token", "auth_token", "id_token",
    "refresh_token", "api_key", "apikey", "key", "secret", "client_secret", "auth",
    "authorization", "signature", "sig", "x_amz_signature", "x_amz_credential",
    "x_amz_security_token", "credential", "session", "sessionid"})

#: The flag each profile field comes from, to name it when the spec refuses its value.
FLAGS = {"name": "--name", "model": "--model", "speculative_method": "--method",
         "num_spec_tokens": "--k", "category": "--category", "provenance.source": "--source",
         "provenance.run": "--run", "provenance.benchmark": "--benchmark",
         "provenance.hardware": "--hardware", "provenance.engine_image": "--engine-image",
         "provenance.sampling.temperature": "--temperature", "provenance.sampling.top_p":
         "--top-p", "provenance.sampling.top_k": "--top-k",
         "provenance.sampling.max_tokens": "--max-tokens", "provenance.prompts": "--prompts"}

@dataclass(frozen=True)
class Facts:
    """What the counters cannot say: the profile's key and how the run was made."""

    model: str
    method: str
    k: int
    thinking: str
    category: str
    hardware: str
    engine_image: str
    sampling: Sampling
    source: str | None = None
    run: str | None = None
    benchmark: str | None = None
    prompts: int | None = None


@dataclass(frozen=True)
class Tally:
    """A run's counts, exact: steps that drafted, tokens drafted, drafts accepted, and (where the
    source gives them) ``per_position[i]``, the steps that accepted at least i + 1 drafts."""

    drafts: Fraction
    draft_tokens: Fraction
    accepted: Fraction
    per_position: tuple[Fraction, ...] | None = None

    def counts(self) -> Counts:
        """The profile's :class:`~registry_db.model.Counts` (whole numbers, as counted)."""
        per = None if self.per_position is None else tuple(int(n) for n in self.per_position)
        return Counts(int(self.drafts), int(self.draft_tokens), int(self.accepted), per)


@dataclass(frozen=True)
class Measured:
    """A run's counts as a counter source read them: the exact tally, AL and the per-position
    rates (nearest floats, rounded only when asked), how the inputs are named (``BEFORE ->
    AFTER``) and the reader's warnings."""

    tally: Tally
    acceptance_length: float
    rates: tuple[float, ...] | None
    where: str
    warnings: tuple[Finding, ...] = ()


def problem(file: str, line: int, path: str, code: str, message: str,
            severity: str = "error") -> Finding:
    """A finding at ``line`` of ``file`` (column 1; 0 and 0 when the line is not known)."""
    return Finding(file, line, 1 if line else 0, path, code, message, severity)


def check_k(k: int) -> None:
    """K within the registry's limit, checked before anything is sized by it."""
    if not 1 <= k <= MAX_K:
        raise UsageError(f"--k {k} is outside 1..{MAX_K} (the registry's limit on K)")


# --- reading an input ---------------------------------------------------------------------------

def label(location: str) -> str:
    """How findings and the recorded source name an input: its path, its URL without secrets
    (:func:`redact`), ``<stdin>`` for ``-``."""
    if location == "-":
        return "<stdin>"
    return redact(location) if location.startswith(("http://", "https://")) else location


def redact(url: str) -> str:
    """``url`` without its secrets: the user and password of ``user:pw@host`` dropped, and the
    values of secret query parameters (:data:`SECRET_PARAMS`, or any name holding ``token``,
    ``secret`` or ``password``) written as ``REDACTED``."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # a URL urllib cannot split is shown only by its scheme
        return url.split(":", 1)[0] + "://(a URL that cannot be parsed)"
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    query = "&".join(_redact_pair(pair) for pair in parts.query.split("&")) \
        if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment and "REDACTED"))


def _redact_pair(pair: str) -> str:
    from urllib.parse import unquote_plus

    name, eq, _ = pair.partition("=")
    key = unquote_plus(name).lower().replace("-", "_")
    secret = key in SECRET_PARAMS or any(w in key for w in ("token", "secret", "password"))
    return f"{name}=REDACTED" if eq and secret else pair


def read_input(location: str) -> str:
    """The text at ``location``: a file, ``-`` (stdin) or an ``http://``/``https://`` URL.

    Raises :class:`InvalidInput` with one finding when it cannot be read, is over
    :data:`MAX_INPUT_BYTES`, or is not UTF-8; a fetch waits at most :data:`FETCH_TIMEOUT`.
    """
    where = label(location)
    limit = MAX_INPUT_BYTES  # read at each call: tests lower it

    def fail(code: str, message: str) -> InvalidInput:
        return InvalidInput([problem(where, 0, "", code, message)])

    if location.startswith(("http://", "https://")):
        data = _fetch(location, limit, fail)
    elif location == "-":
        data = sys.stdin.buffer.read(limit + 1)
    else:
        try:
            with open(location, "rb") as f:
                data = f.read(limit + 1)
        except OSError as exc:
            raise fail("unreadable_file",
                       f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise fail("too_large", f"more than {limit:,} bytes; a /metrics scrape or a run's "
                                "statistics are far smaller: is this the right input?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail("unreadable_file", f"not UTF-8 text (byte {exc.start})") from None


def _fetch(url: str, limit: int, fail: Callable[[str, str], InvalidInput]) -> bytes:
    """The body at ``url``, fetched on a worker thread that the caller stops waiting for at
    the deadline: every step of urllib (connect, each header line, each read) has only a
    per-call timeout, so no setting bounds the whole."""
    import threading
    import time

    deadline = FETCH_TIMEOUT  # read at each call: tests lower it
    outcome: list[bytes | InvalidInput] = []
    stop = threading.Event()

    def work() -> None:
        try:
            outcome.append(_fetch_body(url, limit, fail, stop, time.monotonic() + deadline))
        except InvalidInput as exc:
            outcome.append(exc)
        except Exception as exc:  # anything urllib raises is one line about the fetch
            outcome.append(fail("fetch_failed", f"cannot fetch it: {_no_secrets(str(exc))}"))

    worker = threading.Thread(target=work, name="registry-fetch", daemon=True)
    worker.start()
    worker.join(deadline)
    stop.set()  # the worker stops at its next read if it is still going
    if not outcome:
        raise fail("fetch_failed", f"no complete answer within {deadline:g} s (the limit on a "
                                   "whole fetch); is the server up and answering?")
    result = outcome[0]
    if isinstance(result, InvalidInput):
        raise result
    return result


def _userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without ``user:pw@``, and those as HTTP basic credentials (None without)."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment)), token


def _no_secrets(text: str) -> str:
    """``text`` with every URL in it redacted (a message urllib wrote may quote one)."""
    import re

    return re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+", lambda m: redact(m.group(0)), text)


def _fetch_body(url: str, limit: int, fail: Callable[[str, str], InvalidInput],
                stop: Any, deadline: float) -> bytes:
    import time
    import urllib.error
    import urllib.request

    class HttpOnly(urllib.request.HTTPRedirectHandler):
        # urllib follows http, https and ftp; only http(s) is promised.
        def http_error_302(self, req: Any, fp: Any, code: int, msg: str, headers: Any
                           ) -> Any:
            from urllib.parse import urljoin, urlsplit

            newurl = headers.get("location") or headers.get("uri")
            if newurl is not None:
                target = urljoin(req.full_url, newurl)
                if urlsplit(target).scheme.lower() not in ("http", "https"):
                    raise fail("fetch_failed", f"the server redirected to {redact(target)}; "
                                               "only http:// and https:// are followed")
            return super().http_error_302(req, fp, code, msg, headers)

        http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    opener = urllib.request.build_opener(HttpOnly)
    headers = {
        # Prometheus text, not OpenMetrics, and JSON for TensorRT-LLM's /metrics.
        "Accept": "text/plain;version=0.0.4;q=1, application/json;q=0.9, */*;q=0.1"}
    url, credentials = _userinfo(url)
    if credentials is not None:  # urllib cannot send user:pw@ itself: HTTP basic auth
        headers["Authorization"] = f"Basic {credentials}"
    request = urllib.request.Request(url, headers=headers)
    try:
        with opener.open(request, timeout=FETCH_TIMEOUT) as response:
            chunks: list[bytes] = []
            size = 0
            while size <= limit:
                if stop.is_set() or time.monotonic() >= deadline:  # never a partial body
                    raise fail("fetch_failed", "the answer did not end within "
                                               f"{FETCH_TIMEOUT:g} s (the limit on a whole fetch)")
                chunk = response.read1(min(65536, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
    except urllib.error.HTTPError as exc:
        raise fail("fetch_failed", f"the server answered HTTP {exc.code} "
                                   f"{_no_secrets(str(exc.reason))}") from None
    except urllib.error.URLError as exc:
        why = getattr(exc.reason, "strerror", None) or exc.reason
        raise fail("fetch_failed", f"cannot fetch it: {_no_secrets(str(why))}; is the server "
                                   "up at that address?") from None
    except (TimeoutError, OSError) as exc:
        why = f"no answer within {FETCH_TIMEOUT:g} s" if isinstance(
            exc, TimeoutError) else (exc.strerror or exc)
        raise fail("fetch_failed", f"cannot fetch it: {_no_secrets(str(why))}") from None


# --- JSON inputs ----------------------------------------------------------------------------------

def json_items(file: str, text: str, what: str) -> list[tuple[int, Any]]:
    """The values of a JSON text with their lines: JSON lines, concatenated values, or an array
    (as an endpoint returns it), each top-level array's elements one by one.

    ``what`` names the expected input in messages. Raises :class:`InvalidInput` (FILE:LINE:COL)
    for text that is not JSON.
    """
    import json
    from bisect import bisect_right

    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    decoder = json.JSONDecoder()
    items: list[tuple[int, Any]] = []
    at, end = (1 if text.startswith("\ufeff") else 0), len(text)

    def skip(i: int) -> int:
        while i < end and text[i] in " \t\r\n":
            i += 1
        return i

    def value(i: int) -> int:
        item, after = decoder.raw_decode(text, i)
        items.append((bisect_right(starts, i), item))
        return int(after)

    try:
        while (at := skip(at)) < end:
            if text[at] != "[":
                at = value(at)
                continue
            at = skip(at + 1)
            while at < end and text[at] != "]":
                at = skip(value(at))
                if at < end and text[at] == ",":
                    at = skip(at + 1)
                elif at >= end or text[at] != "]":
                    raise json.JSONDecodeError("expected ',' or ']'", text, at)
            at += 1
    except json.JSONDecodeError as exc:
        from registry_db.sources.counters.forms import seen

        other = seen(text, ())  # a scrape or a log given to a JSON reader: say which
        raise InvalidInput([Finding(file, exc.lineno, exc.colno, "", "not_json",
                                    f"not JSON: {other}" if other is not None
                                    else f"not JSON ({exc.msg}); give {what}")]) from None
    except RecursionError:
        raise InvalidInput([problem(file, 0, "", "not_json",
                                    "JSON nested too deeply to be " + what)]) from None
    return items


def count(value: Any) -> int | None:
    """``value`` when it is a count (an integer, not negative, not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


# --- the arithmetic ------------------------------------------------------------------------------

def acceptance(tally: Tally, k: int, round_to: int | None, file: str, path: str
               ) -> tuple[float, tuple[float, ...] | None]:
    """AL = 1 + accepted / drafts and, with per-position counts, p_i = per_position[i] / drafts;
    rounded to ``round_to`` decimals when given (the rates still summing to AL − 1).

    Raises :class:`InvalidInput` when the counts cannot be a profile of K: AL above K + 1, more
    accepted than drafted, a position accepted more often than there were drafts or than the
    one before it, or per-position counts that disagree with the accepted total.
    """
    d = tally.drafts
    al = 1 + tally.accepted / d
    rates = None if tally.per_position is None else [n / d for n in tally.per_position]
    problems = []
    if al > k + 1:
        problems.append(f"AL {float(al)!r} exceeds K + 1 = {k + 1}; is --k the server's K?")
    if tally.accepted > tally.draft_tokens:
        problems.append(f"more drafts accepted ({number(tally.accepted)}) than drafted "
                        f"({number(tally.draft_tokens)})")
    if rates is not None:
        if any(r > 1 for r in rates):
            problems.append("a position was accepted more often than there were drafts")
        if any(later > earlier for earlier, later in zip(rates, rates[1:])):
            problems.append("the per-position counts rise with the position; a draft is "
                            "accepted only after every draft before it")
        if abs(sum(rates) - (al - 1)) > Fraction(str(SUM_TOLERANCE)):
            summed = sum(tally.per_position or (), Fraction(0))
            problems.append(f"the per-position counts sum to {number(summed)} but accepted "
                            f"tokens are {number(tally.accepted)}")
    if problems:
        raise InvalidInput([problem(file, 0, path, "inconsistent_counters",
                                    f"{p}; the counters are inconsistent") for p in problems])
    if round_to is None:
        return float(al), None if rates is None else tuple(float(r) for r in rates)
    if rates is None:
        return float(round(al, round_to)), None
    return round_rates(al, rates, round_to)


def round_rates(al: Fraction, rates: list[Fraction], places: int
                ) -> tuple[float, tuple[float, ...]]:
    """AL rounded to ``places`` decimals, and rates rounded so that they sum to it minus 1.

    Each rate is floored to the grid and the units still owed to the rounded AL − 1 go to the
    largest remainders (ties to the earlier position), which keeps the rates non-increasing and
    within [0, 1]: rounding each rate alone could miss AL − 1 by K half-units.
    """
    unit = Fraction(1, 10 ** places)
    al_r = round(al, places)
    floors = [r // unit for r in rates]
    owed = int((al_r - 1) / unit) - sum(floors)
    order = sorted((i for i, r in enumerate(rates) if r % unit),
                   key=lambda i: (-(rates[i] % unit), i))
    chosen = set(order[:max(0, owed)])
    rounded = [(f + (1 if i in chosen else 0)) * unit for i, f in enumerate(floors)]
    return float(al_r), tuple(float(r) for r in rounded)


def draft_token_findings(tally: Tally, k: int, al: float, where: tuple[str, int, str]
                         ) -> list[Finding]:
    """Draft tokens against K × drafts: more is an error (the server's K is above --k); fewer
    is the adaptive-verification warning (AL stands, but the accepted fraction of draft tokens
    then differs from (AL − 1) / K)."""
    file, line, path = where
    full = k * tally.drafts
    if tally.draft_tokens > full:
        return [problem(file, line, path, "draft_tokens_above_k",
                        f"draft tokens ({number(tally.draft_tokens)}) exceed K x drafts ({k} x "
                        f"{number(tally.drafts)} = {number(full)}): the server drafted more "
                        f"than {k} tokens per step; is --k the server's K?")]
    if tally.draft_tokens == full:
        return []
    logged = tally.accepted / tally.draft_tokens if tally.draft_tokens else Fraction(0)
    return [problem(file, line, path, "draft_tokens_not_k_drafts",
                    f"draft tokens ({number(tally.draft_tokens)}) are not K x drafts ({k} x "
                    f"{number(tally.drafts)} = {number(full)}): some steps drafted fewer than "
                    f"K tokens (adaptive verification), or the server's K is not --k {k}. AL is "
                    f"still 1 + accepted / drafts = {al!r}, but the logged acceptance rate "
                    f"(accepted / draft tokens = {float(logged)!r}) then differs from "
                    f"(AL - 1) / K = {float((tally.accepted / tally.drafts) / k)!r}; both "
                    "counts are recorded", severity="warning")]


# --- the profile ---------------------------------------------------------------------------------

def measured_set(facts: Facts, tally: Tally, al: float, rates: tuple[float, ...] | None, *,
                 default_source: str, name: str | None, default_name: str,
                 warnings: list[Finding], settings: tuple[tuple[str, Any], ...] = ()
                 ) -> Ingested:
    """One measured profile with ``tally`` as its counts, as a rendered and validated set.

    A value the spec refuses can only have come from a flag (everything the counts give was
    checked before), so it is a :class:`UsageError` naming the flag.
    """
    provenance = Provenance(
        source=facts.source or default_source, run=facts.run, benchmark=facts.benchmark,
        prompts=facts.prompts, hardware=facts.hardware, engine_image=facts.engine_image,
        sampling=facts.sampling, settings=settings)
    profile = Profile(model=facts.model, speculative_method=facts.method,
                      num_spec_tokens=facts.k, thinking=facts.thinking, category=facts.category,
                      acceptance_length=al, method="measured", per_position_rates=rates,
                      provenance=provenance, counts=tally.counts())
    ps = ProfileSet(name if name is not None else safe_name(default_name), (), (profile,))
    refused = [f"{FLAGS.get(what, what)}: {f.message}" for _, what, f in spec_problems(ps)]
    if refused:
        raise UsageError("; ".join(refused))
    return rendered([ps], warnings)


def stem(location: str) -> str:
    """The default set name's source: a file's stem, the last part of a URL's path."""
    if location == "-":
        return "stdin"
    if location.startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        parts = urlsplit(location)
        return f"{parts.hostname or 'server'}-{Path(parts.path).stem or 'metrics'}"
    return Path(location).stem


def number(value: Fraction) -> int | float:
    """A count as an int when whole (as counters are), else a float."""
    return int(value) if value.denominator == 1 else float(value)
