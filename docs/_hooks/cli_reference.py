"""MkDocs hook: the command-line reference generated from the argparse parsers at build time, so it cannot
drift from the code. A page holding the line ``<!-- normvar-cli -->`` gets, in its place, one section per
``normvar`` command (in the order of ``normvar --help``): its help line, its usage and a table of its
arguments (name, what it takes, what it does, its default)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the checkout's normvar_core, as mkdocstrings' `paths: [.]`
    sys.path.insert(0, str(ROOT))

from normvar_core.service.cli import build_parser  # noqa: E402  -- after the sys.path line above

MARKER = "<!-- normvar-cli -->"


def _cell(text) -> str:
    """One table cell: one line, pipes escaped, ``<name>`` shown as text rather than read as an HTML tag."""
    text = " ".join(str(text).split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


def _help(action: argparse.Action, prog: str) -> str:
    if not action.help:
        return ""
    params = dict(vars(action), prog=prog)
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return action.help % params


def _takes(action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " · ".join(f"`{c}`" for c in action.choices)
    if action.nargs == 0:
        return "flag"
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    return f"`{metavar}`" + (" …" if action.nargs in ("+", "*") else "")


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    return f"`{action.default!r}`" if action.default == "" else f"`{action.default}`"


def commands(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """Every ``normvar`` command: (name, its one-line help, its parser), in the order of ``normvar --help``."""
    parser = parser or build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    return [(name, helps.get(name, ""), p) for name, p in sub.choices.items()]


def command_markdown(name: str, summary: str, parser: argparse.ArgumentParser) -> str:
    lines = [f"## normvar {name}", "", _cell(summary) + ".", ""]
    if parser.description and parser.description.strip() != summary.strip():
        lines += [_cell(parser.description), ""]
    usage = parser.format_usage().replace("usage: ", "", 1).strip()
    lines += ["```text", usage, "```", "", "| argument | takes | what it does | default |", "|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        lines.append(f"| {names} | {_takes(action)} | {_cell(_help(action, parser.prog))} | {_default(action)} |")
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    parser = build_parser()
    parts = ["`normvar` takes one command; `normvar COMMAND --help` prints the same as its section here.\n"]
    for name, summary, sub in commands(parser):
        parts.append(command_markdown(name, summary, sub))
    return "\n".join(parts)


def on_page_markdown(markdown, **kwargs):
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_markdown())
