"""The ``deltafit`` command.

``deltafit demo`` (in ``_demo``) follows a model in service while its data changes: a deletion
request, corrected labels, new data and a what-if (certified bounds, ``deltafit.sensitivity``),
each update timed warm against a refit on the same data and checked against it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from deltafit.cli._demo import add_demo_command, demo

__all__ = ["main", "demo"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="deltafit",
        description="Exact and certified updates of trained models when the training data changes.",
    )
    from deltafit._version import __version__

    p.add_argument("--version", action="version", version=f"deltafit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    add_demo_command(sub)
    from deltafit.cli._attribute import add_attribute_command
    from deltafit.cli._cv import add_cv_commands
    from deltafit.cli._experiments import add_experiment_commands
    from deltafit.cli._treecv import add_treecv_command

    add_cv_commands(sub)
    add_treecv_command(sub)
    add_experiment_commands(sub)
    add_attribute_command(sub)
    return p


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (a data error's message may span lines)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _run_command(args: argparse.Namespace) -> int:
    """Run the subcommand of ``args``; returns its exit status."""
    if args.command == "demo":
        dev = demo(args)
        tol = 1e-8 if args.loss == "squared" else 1e-6
        return 0 if dev < tol else 1
    if args.command in ("loo", "search"):
        from deltafit.cli._cv import run_cv_command

        return run_cv_command(args)
    if args.command == "treecv":
        from deltafit.cli._treecv import run_treecv_command

        return run_treecv_command(args)
    if args.command == "attribute":
        from deltafit.cli._attribute import run_attribute_command

        return run_attribute_command(args)
    if args.command in ("stream", "active"):
        from deltafit.cli import _experiments as _cli_experiments

        return getattr(_cli_experiments, f"run_{args.command}_command")(args)
    return 2  # pragma: no cover


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``deltafit`` command; returns the exit status.

    A problem with the data or the options (a file that is missing or does not parse, an
    unknown column, a data set whose files are absent, an optional package not installed, a
    figure that cannot be written) is reported as argparse reports a bad option: one line on
    stderr, ``deltafit COMMAND: error: ...`` naming the problem and its fix, exit status 2.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return _run_command(args)
    except (ValueError, OSError, ImportError) as exc:
        # OSError: files (FileNotFoundError for a data set's absent files, PermissionError,
        # a --plot/--save/--out path in a missing folder); ImportError: an optional package
        print(f"deltafit {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
