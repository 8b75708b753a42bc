"""``registry exec``: resolve a run, then replace this process with the engine's command, the
hand-off applied; a refusal starts nothing.

Parses the same run options as ``registry resolve`` (:mod:`registry_db.cli.resolve`), resolves
exactly as it does, applies the settings with :mod:`registry_db.resolve.launch` and
``os.execvpe``\\ s the command. Every refusal (the resolution's, an inexact hand-off, a K the
command contradicts) is one line on stderr and exit 1, before anything is started.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from registry_db.cli.output import handle_errors
from registry_db.cli.resolve import (
    Handoff,
    _handed,
    _into,
    _resolved,
    _run_options,
    allow_inexact_option,
    check_run_flags,
    into_option,
    refuse,
)
from registry_db.resolve.engines import ENGINES

#: The exit codes of a command that could not be started (as ``env`` and ``nohup`` use them).
NOT_FOUND, NOT_EXECUTABLE = 127, 126


@click.command("exec", context_settings={"allow_interspersed_args": False})
@_run_options
@click.option("--emit", "engine", required=True, type=click.Choice(list(ENGINES)),
              metavar="ENGINE", help=f"The engine the command runs: {', '.join(ENGINES)}.")
@into_option
@allow_inexact_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED,
                metavar="-- CMD [ARGS]...")
@click.pass_context
@handle_errors
def exec_(ctx: click.Context, engine: str, into: str | None, allow_inexact: bool,
          command: tuple[str, ...], **run: Any) -> None:
    """Resolve a run as `registry resolve` does, then start CMD with the settings the engine
    takes. Environment variables (SGLang, TensorRT-LLM, TileRT), vLLM's settings merged into
    the command's own --speculative-config, or arguments appended (ATOM, BLIS); a refusal
    starts nothing and exits 1.

    \b
    Example:
        registry exec --model deepseek-v4.1-flash --method dspark --k 5 \\
            --thinking off --category coding --emit sglang \\
            -- python -m sglang.launch_server ...
        registry exec --model glm-5.3 --method mtp --k 3 --thinking on \\
            --category coding --emit vllm -- vllm serve zai-org/GLM-5.3 \\
            --speculative-config '{"method": "mtp", "num_speculative_tokens": 3}'
    """
    from registry_db.errors import ResolutionRefused
    from registry_db.resolve.launch import command_with_handoff
    from registry_db.resolve.plan import resolve as resolve_run

    if into is not None and engine != "vllm":
        raise click.UsageError("--into merges vLLM's settings into a speculative config: give "
                               "--emit vllm")
    check_run_flags(run, None)
    base = _into(into)
    answer = _resolved(ctx.obj, run, False, resolve_run)
    settings = _handed(Handoff(engine, allow_inexact=allow_inexact), answer, False)
    try:
        argv, env = command_with_handoff(settings, command, os.environ,
                                         answer.num_spec_tokens, into=base)
    except ResolutionRefused as refusal:
        refuse(refusal, False)
    for note in answer.warnings:
        click.echo(f"note: {note}", err=True)
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        click.echo(f"Error: cannot run {argv[0]!r}: {exc.strerror or exc}", err=True)
        sys.exit(NOT_FOUND if isinstance(exc, FileNotFoundError) else NOT_EXECUTABLE)
