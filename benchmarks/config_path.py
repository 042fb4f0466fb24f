"""The modules a run's config passes through, in order, from ``normvar compute`` to the published file.

A ``sys.setprofile`` tracer (this thread and every thread started meanwhile) records each call of a
``normvar_core`` function that takes the run's configuration: an argument other than ``self``/``cls`` that is
a ``RunConfig``, or that holds one as ``.cfg`` (a plan, a context, a run target or setup); and, for the
last steps where the config has become a file, each call that takes the run file's path (or its temp
file's). Consecutive calls in one module are one **stay**. Counted over the stays:

* returns: a stay in a module the path had already left (``read -> ranges -> read``);
* climbs: a stay on a higher floor than the one before it (floors are ``tests/test_layers.py``'s ranks:
  base 0, stats 1, runs 2, pipeline/viz 3, report 4, service 5), i.e. the path going back up the layers;
* names: the distinct (module, parameter) names the configuration is bound to on the way.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python benchmarks/config_path.py [--json out.json]

A tiny random-init Llama (``tests/conftest.build_tiny_models``) over 40 sentences of the shipped novels; the
measure is of the code's shape, not its speed, so the machine's load does not matter.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = "configpath"  # the run's name: its file and temp file are found by it
RANK = {"base": 0, "stats": 1, "runs": 2, "pipeline": 3, "viz": 3, "report": 4, "service": 5}


@functools.cache
def _module(filename: str, pkg_root: Path) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(pkg_root)
    except ValueError:
        return None
    name = ".".join(rel.with_suffix("").parts)
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _floor(module: str) -> int:
    parts = module.split(".")
    return RANK.get(parts[1], 0) if len(parts) > 2 else 0


def trace_compute(argv: list[str]) -> list[tuple[str, str, str]]:
    """(module, function, parameter) of every call that takes the config, in call order."""
    import normvar_core
    from normvar_core.config import RunConfig
    from normvar_core.service import cli

    pkg_root = Path(normvar_core.__file__).resolve().parent.parent
    calls: list[tuple[str, str, str]] = []
    lock = threading.Lock()

    def holds_config(v) -> bool:
        if isinstance(v, Path):
            return v.name.startswith((RUN, "." + RUN))
        if isinstance(v, RunConfig):
            return True
        d = getattr(v, "__dict__", None)
        return isinstance(d, dict) and isinstance(d.get("cfg"), RunConfig)

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        module = _module(code.co_filename, pkg_root)
        if module is None or not module.startswith("normvar_core"):
            return
        n = code.co_argcount + code.co_kwonlyargcount
        for name in code.co_varnames[:n]:
            if name not in ("self", "cls") and holds_config(frame.f_locals.get(name)):
                with lock:
                    calls.append((module, code.co_qualname, name))
                return

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        status = cli.main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    if status != 0:
        raise SystemExit(f"compute failed ({status})")
    return calls


PUBLISH = {("normvar_core.destination", "move_into_place"), ("normvar_core.runs.writer", "publish")}  # after, before


def summarize(calls: list[tuple[str, str, str]]) -> dict:
    """The stays up to the atomic publish of the run file (what the CLI prints afterwards is left out)."""
    ends = [i for i, (m, f, _) in enumerate(calls) if (m, f) in PUBLISH]
    calls = calls[: ends[-1] + 1] if ends else calls
    stays: list[str] = []
    for module, _, _ in calls:
        if not stays or stays[-1] != module:
            stays.append(module)
    seen: set[str] = set()
    returns = climbs = 0
    for i, m in enumerate(stays):
        if m in seen:
            returns += 1
        seen.add(m)
        if i and _floor(m) > _floor(stays[i - 1]):
            climbs += 1
    names = {(m, p) for m, _, p in calls}
    return dict(
        stays=len(stays),
        modules=len(seen),
        returns=returns,
        climbs=climbs,
        names=len(names),
        path=[m.removeprefix("normvar_core.") for m in stays],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write the summary here too")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import build_tiny_models

    from normvar_core.datadir import DEFAULT_CORPUS

    work = Path(tempfile.mkdtemp(prefix="nv-config-path-"))
    models = build_tiny_models(work / "models")
    with gzip.open(DEFAULT_CORPUS, "rt", encoding="utf-8") as fh:
        lines = [s.strip() for s in itertools.islice(fh, 7000, 7040)]
    corpus = work / "novels40.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = [
        "compute",
        "--model",
        str(models["llama"]),
        "--corpus",
        str(corpus),
        "--name",
        RUN,
        "--data-dir",
        str(work / "data"),
        "--quiet",
    ]
    out = summarize(trace_compute(argv))
    print(json.dumps({k: v for k, v in out.items() if k != "path"}))
    print(" -> ".join(out["path"]))
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
