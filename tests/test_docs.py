"""The manual (docs/, MkDocs with the Material theme) builds with ``mkdocs build --strict``, every page is in
the nav, and the built site loads nothing from another host: no script, stylesheet, font, image or frame
from anywhere but the site itself (links to papers are fine). Every local link and image of every built page
names a file that exists (so the site opens from file:// as over HTTP), the user pages tell tasks and meanings
(no issue numbers, stops or test files: those live on the Development and Benchmarks pages), and the
command-line reference holds every command and option of the parsers. The README stays short and its Python example
runs on a real run file; CITATION.cff parses and names the tool and the studies' papers."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


class _Resources(HTMLParser):
    """Every URL a page *loads*: script/img/iframe/source/embed src, <link> href (stylesheets, fonts,
    icons, preloads), object data, srcset entries and inline style url(...). <a href> is navigation, not
    a load, and is left out."""

    LOADS = {
        "script": "src",
        "img": "src",
        "iframe": "src",
        "source": "src",
        "embed": "src",
        "video": "src",
        "audio": "src",
        "track": "src",
        "object": "data",
    }

    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in self.LOADS and a.get(self.LOADS[tag]):
            self.urls.append((tag, a[self.LOADS[tag]]))
        if tag == "link" and a.get("href"):
            self.urls.append((f"link rel={a.get('rel')}", a["href"]))
        for src in (a.get("srcset") or "").split(","):
            if src.strip():
                self.urls.append((f"{tag} srcset", src.split()[0]))
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)", a.get("style") or ""):
            self.urls.append((f"{tag} style", url))


class _Links(HTMLParser):
    """Every local URL a page names: <a href>, <link href> and every src (images, scripts, frames)."""

    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.urls.append((f"{tag} {name}", value))


def _target(site: Path, page: Path, url: str) -> Path | None:
    """The file a local URL of ``page`` names (None for a link into the page itself: ``#anchor``, ``?q``)."""
    parsed = urlparse(url)
    if not parsed.path:
        return None
    return (site / parsed.path.lstrip("/")) if parsed.path.startswith("/") else (page.parent / parsed.path)


def broken_links(site: Path) -> list[tuple[str, str, str]]:
    """(page, what, url) for every local href/src of a built page that names a folder or nothing."""
    broken = []
    for page in sorted(site.rglob("*.html")):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for what, url in parser.urls:
            if _foreign(url) or url.startswith(("data:", "blob:", "mailto:", "javascript:")):
                continue
            target = _target(site, page, url)
            if target is not None and not target.resolve().is_file():
                broken.append((str(page.relative_to(site)), what, url))
    return broken


# what a user page must not name: the project's history (issue numbers, stops) and its test files
HISTORY = re.compile(r"(?<![\w/&])#\d+\b|\bissues?\s+\d+|\bstops?\s+\d+|\btests/|\btest_\w+\.py", re.I)
HISTORY_PAGES = ("development.md", "benchmarks.md")  # the history lives here


def history_lines(text: str) -> list[str]:
    return [line.strip()[:160] for line in text.splitlines() if HISTORY.search(line)]


def _foreign(url: str) -> bool:
    """True for a URL that names another host (http, https, protocol-relative, ws, ftp ...)."""
    parsed = urlparse(url.strip())
    return bool(parsed.netloc) or parsed.scheme not in ("", "data", "blob", "mailto")


def _nav_files(items) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out.extend(_nav_files(value) if isinstance(value, list) else [value])
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


@pytest.mark.subprocess
def test_manual_builds_strict_and_loads_nothing_from_other_hosts(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 20 and (site / "index.html").exists()
    foreign = []
    for page in pages:
        parser = _Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        foreign += [(str(page.relative_to(site)), what, url) for what, url in parser.urls if _foreign(url)]
    for css in site.rglob("*.css"):  # fonts and images pulled in by a stylesheet
        text = css.read_text(encoding="utf-8", errors="replace")
        urls = re.findall(r"url\(\s*['\"]?([^'\")]+)", text) + re.findall(r"@import\s+['\"]([^'\"]+)", text)
        foreign += [(str(css.relative_to(site)), "css", url) for url in urls if _foreign(url)]
    assert not foreign, f"the manual loads from other hosts: {foreign[:10]}"
    assets = "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in site.rglob("*") if p.suffix in (".css", ".js")
    )
    assert "fonts.googleapis.com" not in assets and "fonts.gstatic.com" not in assets  # theme.font: false
    # the API pages are rendered from the docstrings, not left as ::: directives
    reader = (site / "api" / "reader.html").read_text(encoding="utf-8")
    assert "open_run" in reader and ":::" not in reader
    measures = (site / "api" / "measures.html").read_text(encoding="utf-8")
    assert "planned_state" in measures and ":func:" not in measures  # docs/_hooks/roles.py


@pytest.mark.subprocess
def test_every_local_link_and_image_resolves_to_a_file(site):
    """From file:// a link to a folder opens a listing and a missing image shows broken: every href and src of
    every page must name a file. The checker itself fails on a folder link and on a missing image."""
    assert not (site / "getting-started").exists() and (site / "getting-started.html").is_file()
    broken = broken_links(site)
    assert not broken, f"{len(broken)} local links name a folder or nothing, e.g. {broken[:8]}"
    assert (site / "dashboard.html").read_text(encoding="utf-8").count('src="screenshots/') >= 6
    page = site / "index.html"
    original = page.read_text(encoding="utf-8")
    try:
        page.write_text(original + '<a href="api/">x</a><img src="screenshots/none.png">', encoding="utf-8")
        assert {u for _, _, u in broken_links(site)} == {"api/", "screenshots/none.png"}
    finally:
        page.write_text(original, encoding="utf-8")


def test_user_pages_name_no_issue_stop_or_test_file():
    """A user page tells a task or a meaning; the project's history belongs to Development and Benchmarks."""
    found = {
        str(p.relative_to(DOCS)): history_lines(p.read_text(encoding="utf-8"))
        for p in sorted(DOCS.rglob("*.md"))
        if p.name not in HISTORY_PAGES
    }
    found = {page: lines for page, lines in found.items() if lines}
    assert not found, found
    for bad in ("fixed in #41", "see issue 41", "at stop 40", "checked by tests/test_x.py", "test_docs.py"):
        assert history_lines(bad), bad
    for fine in ("[Scale](scale.md#device-maps)", "Ctrl-C stops it", "the 40 tests", "&#39;quoted&#39;"):
        assert not history_lines(fine), fine


@pytest.mark.subprocess
def test_cli_reference_holds_every_command_and_option(site):
    """The Command line page is generated from the parsers at build time: every command has its section and
    every option string of every command is on the page (an option added to a parser appears without an edit)."""
    import argparse

    from normvar_core.service.cli import build_parser

    page = (site / "cli.html").read_text(encoding="utf-8")
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 16
    missing = []
    for name, parser in sub.choices.items():
        if f"normvar {name}</h2>" not in page and f'id="normvar-{name}"' not in page:
            missing.append(name)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):  # the page says: COMMAND --help prints this section
                continue
            missing += [f"{name} {o}" for o in action.option_strings if f"<code>{o}</code>" not in page]
    assert not missing, f"not on the Command line page: {missing}"
    assert "&lt;name&gt;.duckdb" in page and "<!-- normvar-cli -->" not in page
    # the page is the parsers': an option added to a parser is in the generated text without any edit
    from docs._hooks.cli_reference import command_markdown, commands

    name, summary, parser = commands()[0]
    parser.add_argument("--a-new-option", type=int, default=7, help="something new | with a pipe")
    text = command_markdown(name, summary, parser)
    assert "| `--a-new-option` | `A_NEW_OPTION` | something new \\| with a pipe | `7` |" in text


@pytest.mark.subprocess
def test_measure_tables_hold_every_registered_measure(site):
    """docs/scale.md's memory table and docs/runfile.md's table of measures are generated from ``MEASURES``: every
    registered measure is on both built pages with its tables and its planned bytes, and a measure added to the
    registry is in the generated text without any edit."""
    from docs._hooks.measure_tables import memory_markdown, reference_contexts, tables_markdown
    from normvar_core.pipeline.measures import MEASURES

    scale = (site / "scale.html").read_text(encoding="utf-8")
    runfile = (site / "runfile.html").read_text(encoding="utf-8")
    assert "normvar-measure-" not in scale + runfile
    ctx = next(iter(reference_contexts().values()))
    for cls in MEASURES:
        assert f"<code>{cls.name}</code>" in scale and f"<code>{cls.name}</code>" in runfile, cls.name
        assert all(f"<code>{t}</code>" in runfile for t in cls.table_names), cls.name
        assert f"<code>{cls.planned_terms(ctx)[0]}</code>" in scale, cls.name

    from examples.norm_measure import NormMeasure

    registry = (*MEASURES, NormMeasure)
    assert f"| `{NormMeasure.name}` |" in tables_markdown(registry) and f"| `{NormMeasure.name}` |" in memory_markdown(
        registry
    )


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["name"] == "material" and config["theme"]["font"] is False and config["strict"] is True
    nav = _nav_files(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages, (
        f"not in the nav: {set(pages) - set(nav)}; in the nav, no file: {set(nav) - set(pages)}"
    )
    assert len(nav) == len(set(nav))


def test_readme_is_short_and_links_into_the_manual():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make run" in text and "make test" in text
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(images) == 1 and (ROOT / images[0]).exists()
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), link


def _readme_python() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) == 1
    assert len([line for line in blocks[0].splitlines() if line.strip()]) <= 5  # blank lines not counted
    return blocks[0]


@pytest.mark.slow
def test_readme_python_example_runs_on_a_real_run(minilm_path, tmp_path, monkeypatch):
    """The README's example, as printed, on a run computed here (MiniLM, 60 sentences of the shipped corpus)
    under the default run's name; the band's Q(X) and V_W(X) it prints equal the count-weighted means of the run
    file's per-type table."""
    from normvar_core import RunConfig, compute_run
    from normvar_core.service.commands_app import DEFAULT_RUN_NAME

    code = _readme_python()
    assert f"data/runs/{DEFAULT_RUN_NAME}.duckdb" in code
    compute_run(RunConfig(model=str(minilm_path), max_sentences=60, name=DEFAULT_RUN_NAME), tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    out, scope = io.StringIO(), {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), scope)
    printed = out.getvalue()
    assert "slope" in printed and "v_w" in printed
    # what it printed first: Q(X) and V_W(X) per layer, here from the run file's token_stats by plain SQL (eqs. 15, 10)
    corpus = scope["run"].stats().corpus(10, 100_000)
    with duckdb.connect(str(tmp_path / "data" / "runs" / f"{DEFAULT_RUN_NAME}.duckdb"), read_only=True) as con:
        ref = con.execute(
            "SELECT layer, sum(n * q) / sum(n) AS q, sum(n * v) / sum(n) AS v_w FROM token_stats "
            "WHERE n BETWEEN 10 AND 100000 GROUP BY layer ORDER BY layer"
        ).df()
    assert len(corpus) == len(ref) == 7
    for col in ("q", "v_w"):
        assert corpus[col].to_numpy() == pytest.approx(ref[col].to_numpy(), rel=1e-9), col
        assert f"{corpus[col].iloc[0]:.6f}"[:6] in printed  # the printed table is that one


def test_citation_cff():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "version", "license"):
        assert cff.get(key), key
    assert cff["title"] == project["name"] and cff["version"] == project["version"]
    assert cff["license"] == project["license"] and "Apache License" in (ROOT / "LICENSE").read_text()
    assert cff["authors"] == [{"name": "The normvar developers"}]
    titles = {}
    for ref in cff["references"]:
        assert ref.get("type") and ref.get("title") and ref.get("authors"), ref
        titles[ref["title"]] = ref
    iso = titles["IsoScore: Measuring the Uniformity of Embedding Space Utilization"]
    assert [a.get("family-names") for a in iso["authors"]] == ["Rudman", "Gillman", "Rayne", "Eickhoff"]
    assert iso["year"] == 2022
    assert "Norm of Mean Contextualized Embeddings Determines their Variance" in titles
    assert "Internal Representation Dynamics in Transformers" in titles


def test_each_test_loop_has_one_stated_time():
    """The fast loop's and the whole suite's time, stated the same way wherever they are stated (the Makefile, the
    README, Development): at most 3 and at most 20 minutes on 2 idle cores, and no other wording of them."""
    for name in ("Makefile", "README.md", "docs/development.md"):
        text = " ".join((ROOT / name).read_text().replace("#", " ").split())  # comment marks and line breaks away
        assert "at most 3 minutes on 2 idle cores" in text and "at most 20 minutes on 2 idle cores" in text, name
        assert not re.search(r"about 2 minutes|under 3 minutes|test-fast[^.]*a few minutes", text), name
