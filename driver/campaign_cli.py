"""``tune``'s campaign options (the campaign itself is :mod:`driver.campaign`)."""

from __future__ import annotations

import os

import click

from miopen_solver.text import shorten

from .options import Integer, UserError

ENGINES = ("local", "dask")


def compile_pool_max() -> int:
    """The largest ``--compile-pool``: one process per CPU. A pool is CPU processes, so more
    only queue on the same cores; an unbounded N started a process per queued kernel (up to
    every config of the sweep) and past 2^31 raised OverflowError in the process pool."""
    return os.cpu_count() or 1


def check_compile_pool(flag: str, value) -> None:
    """``--compile-pool``: an integer from 0 (off) to :func:`compile_pool_max`.

    Raises:
        UserError: anything else (text too: a number too long to convert), naming the value.
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= compile_pool_max()):
        return
    why = "" if str(value).lstrip().startswith("-") else "more compile processes than this host has CPUs; "
    raise UserError(f"{flag} {shorten(value)}: {why}allowed: an integer from 0 (off) to {compile_pool_max()} "
                    f"(the CPU count)")


def wants_campaign(*, file=None, results=None, resume=False, gpus=None, engine=None, address=None,
                   compile_pool=None) -> bool:
    """Whether ``tune``'s options ask for a campaign rather than the single-line sweep."""
    return bool(file is not None or results is not None or resume or gpus is not None
                or engine not in (None, "local") or address is not None or compile_pool)


def campaign_options(f):
    """``--file``, ``--results``, ``--resume``, ``--gpus``, ``--engine``, ``--address``,
    ``--compile-pool`` (see :class:`driver.campaign.CampaignOptions`)."""
    opts = [
        click.option("--file", "file", default=None, metavar="FILE",
                     help="Tune every -F 2 line of FILE (perf-model file, MIOPEN_ENABLE_LOGGING_CMD log, "
                          "bench suite) in one campaign."),
        click.option("--results", "results", default=None, metavar="PATH",
                     help="Append every timed config and problem verdict to this JSONL log."),
        click.option("--resume", is_flag=True, help="Continue the --results log: skip what it holds."),
        click.option("--gpus", "gpus", default=None, metavar="all|N|0,2,5",
                     help="One timing worker per GPU (with --backend cpu: N CPU workers)."),
        click.option("--engine", "engine", type=click.Choice(ENGINES), default="local", show_default=True,
                     help="local: workers on this host; dask: one Dask worker per GPU."),
        click.option("--address", "address", default=None, metavar="tcp://HOST:PORT",
                     help="The Dask scheduler (--engine dask); without it a LocalCluster is started."),
        click.option("--compile-pool", "compile_pool", type=Integer(check_compile_pool), default=0, show_default=True,
                     metavar="N",
                     help="CPU processes that compile the next configs while the GPUs time (0: off; at most the CPU count)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


__all__ = ["ENGINES", "campaign_options", "wants_campaign"]
