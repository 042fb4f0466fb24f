"""``compute_run``: corpus + model -> one published run file, as a short composition of the stages

    plan (plan.py) -> state source (sources.py) -> accumulators (accumulators/) -> merge (execute.py)
    -> publish (publish.py)

The checks that need no model come first (name taken, destination writable, corpus readable);
then the model is loaded, the plan built, the batches run through every accumulator and the run
published atomically. Checkpoints (``checkpoint=PATH``): every ``checkpoint_every_s`` seconds, and
when cancelled or interrupted between batches, the partial state of the batches done is saved
(``checkpoint.py``); a run resumes from it when its plan fingerprint matches, and the published
statistics equal those of an uninterrupted run exactly. Nothing is published on any error;
``should_cancel()`` is polled between batches and raises ``errors.CancelledError``.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from normvar_core.config import RunConfig, default_run_name
from normvar_core.datadir import DataDir
from normvar_core.destination import resolve_destination
from normvar_core.errors import NormvarError
from normvar_core.runs.writer import check_destination


PHASES = {"corpus": "plan", "model": "plan", "tokenize": "plan", "compute": "forward", "finalize": "finalize",
          "write": "write", "done": "done"}
"""stage -> phase: plan (read the corpus, load the model, tokenize and count), forward (the batches),
finalize (every measure's result: spectra, TwoNN, seed 004's batches), write (the run file's tables)."""
PHASE_SPAN = {"plan": (0.0, 5.0), "forward": (5.0, 90.0), "finalize": (90.0, 95.0), "write": (95.0, 100.0),
              "done": (100.0, 100.0)}
"""The part of the progress bar each phase fills (percent): the forward pass is most of a run."""


@dataclass
class Progress:
    """Passed to ``progress(p)``. ``stage`` in {corpus, model, tokenize, compute, finalize, write, done}
    (``phase``: plan, forward, finalize, write, done — ``PHASES``); ``embeddings`` counted so far (per
    layer), ``emb_per_s`` for the forward phase; ``done``/``total`` counts of the phase in ``unit``
    (sentences, measures, tables), ``detail`` what it is doing, ``eta_s`` the phase's remaining seconds
    (forward: the batches left at the current rate), ``percent`` the whole run's (``PHASE_SPAN``)."""

    stage: str
    sentences_done: int = 0
    sentences_total: int = 0
    embeddings: int = 0
    emb_per_s: float = 0.0
    eta_s: float | None = None
    phase: str = ""
    done: int = 0
    total: int = 0
    unit: str = ""
    detail: str = ""
    percent: float = 0.0

    def __post_init__(self) -> None:
        self.phase = self.phase or PHASES.get(self.stage, self.stage)
        if self.stage == "compute" and not self.unit:
            self.done, self.total, self.unit = self.sentences_done, self.sentences_total, "sentences"
        a, b = PHASE_SPAN.get(self.phase, (0.0, 0.0))
        frac = self.done / self.total if self.total else 0.0
        self.percent = round(a + (b - a) * min(max(frac, 0.0), 1.0), 2)


class _PhaseClock:
    """ETA of a phase counted in steps: elapsed / done × (total − done); thread-safe reports."""

    def __init__(self, report):
        import threading

        self.report, self.lock, self.t0, self.phase = report, threading.Lock(), time.monotonic(), None

    def __call__(self, stage: str, done: int, total: int, unit: str, detail: str = "", **kw) -> None:
        with self.lock:
            if PHASES.get(stage) != self.phase:
                self.phase, self.t0 = PHASES.get(stage), time.monotonic()
            el = time.monotonic() - self.t0
            eta = el / done * (total - done) if done > 0 else None
            self.report(Progress(stage, eta_s=eta, done=done, total=total, unit=unit, detail=detail, **kw))


def run_path_for(cfg: RunConfig, data_dir=None, out_dir=None) -> Path:
    out = Path(out_dir) if out_dir is not None else _datadir(data_dir).runs
    return out / f"{cfg.name or default_run_name(cfg)}.duckdb"


def _datadir(data_dir) -> DataDir:
    return data_dir if isinstance(data_dir, DataDir) else DataDir.at(data_dir)


class _Checkpointer:
    """Saves the partial state every ``every_s`` seconds and on interruption between batches."""

    def __init__(self, path: Path | None, fingerprint: dict, every_s: float):
        self.path, self.fingerprint, self.every_s = path, fingerprint, every_s
        self.last = time.monotonic()

    def due(self) -> bool:
        return self.path is not None and time.monotonic() - self.last >= self.every_s

    def save(self, accs: dict, next_batch: int, extra: dict) -> None:
        from normvar_core.pipeline.execute import checkpoint
        from normvar_core.pipeline.execute.partials import partial_state

        if self.path is None:
            return
        checkpoint.save(self.path, self.fingerprint, partial_state(accs, 0, next_batch), extra)
        self.last = time.monotonic()


def compute_run(cfg: RunConfig, data_dir=None, *, overwrite: bool = False,
                progress: Callable[[Progress], Any] | None = None, checkpoint=None,
                checkpoint_every_s: float = 30.0, should_cancel: Callable[[], bool] | None = None,
                out_dir=None) -> Path:
    """Compute the run described by ``cfg`` and publish ``<out_dir or runs/>/<name>.duckdb``.

    Returns the published path. Raises NormvarError (bad input, name taken, OOM on a single
    sentence) or CancelledError; nothing is published then. ``out_dir`` overrides runs/ (CLI --out)."""
    from normvar_core.errors import CancelledError
    from normvar_core.pipeline.execute import checkpoint as ckpt
    from normvar_core.pipeline.corpus import read as C
    from normvar_core.pipeline import models as M
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.execute.partials import build_accumulators, load_partial, run_range
    from normvar_core.pipeline.memory import GiB, run_budget, shape_of_loaded
    from normvar_core.pipeline.plan import make_plan
    from normvar_core.pipeline.publish import publish_run
    from normvar_core.pipeline.sources import TransformerSource

    t_start = time.monotonic()
    _limit_heap_growth()
    cfg = cfg.validate()
    dd = _datadir(data_dir)
    if cfg.name is None:
        cfg = cfg.replace(name=default_run_name(cfg))
    out_path = run_path_for(cfg, dd, out_dir)
    check_destination(out_path, overwrite)
    ckpt_path = resolve_destination(checkpoint, what="--checkpoint", make_parents=True) if checkpoint is not None else None
    if cfg.executor == "ray":
        from normvar_core.pipeline.execute.on_ray import preflight

        preflight(cfg)
    report = progress or (lambda p: None)
    cancelled = should_cancel or (lambda: False)

    def check_cancel() -> None:
        if cancelled():
            raise CancelledError("cancelled")

    # ---- plan: corpus, model, batches, counts, samples
    report(Progress("corpus", done=0, total=3, unit="steps", detail="read the corpus"))
    corpus = C.load_sentences(cfg, dd.root)
    if not corpus.sentences:
        raise NormvarError("no sentences left after filtering the corpus",
                           fix="check the corpus, --max-words, --sample-frac and --max-sentences")
    check_cancel()
    total = len(corpus.sentences)
    report(Progress("model", sentences_total=total, done=1, total=3, unit="steps", detail="load the model"))
    loaded = M.load_model(cfg, dd.root)
    check_cancel()
    report(Progress("tokenize", sentences_total=total, done=2, total=3, unit="steps",
                    detail="tokenize and count"))
    if cfg.executor == "ray":
        return _compute_on_ray(cfg, dd, corpus, loaded, out_path, ckpt_path, report, overwrite, cancelled, t_start,
                               checkpoint_every_s)
    plan = make_plan(cfg, corpus, loaded.tokenizer, num_hidden_states=int(loaded.info.num_hidden_states),
                     max_length=int(loaded.info.max_length), device_type=loaded.device.type)
    del corpus
    source = TransformerSource(loaded, plan.layers)
    ctx = RunContext(cfg=cfg, layers=plan.layers, dim=source.info.dim, device=loaded.device, plan=plan,
                     tokens=plan.tokens)

    # ---- accumulators, resumed from a checkpoint of this plan if there is one; what fits in memory
    fingerprint = dict(plan.fingerprint(), weights_hash=loaded.info.weights_hash)
    saved = ckpt.load(ckpt_path, fingerprint) if ckpt_path is not None else None
    ctx.memory = run_budget(cfg, ctx, shape=shape_of_loaded(loaded), device=loaded.device.type, dtype=cfg.dtype,
                            resume_names=set(saved[0].states) if saved is not None else None)
    if saved is not None:
        partial, meta = saved
        accs = load_partial(ctx, partial)
        first, seconds_before, resumed_from = partial.stop, float(meta.get("seconds", 0.0)), partial.stop
        source.oom_splits, source.max_rows = int(meta.get("oom_splits", 0)), meta.get("max_rows")
    else:
        accs = build_accumulators(ctx)
        first, seconds_before, resumed_from = 0, 0.0, None
    moments = accs["moments"]
    saver = _Checkpointer(ckpt_path, fingerprint, checkpoint_every_s)
    done_at = plan.sentences_done_at()
    pos = {"next": first, "clean_n": moments.n_embeddings}
    emb_at_start, t_loop = moments.n_embeddings, time.monotonic()

    def extra() -> dict:
        return {"seconds": seconds_before + (time.monotonic() - t_start), "oom_splits": source.oom_splits,
                "max_rows": source.max_rows}

    def on_batch(bi: int) -> None:
        pos["next"], pos["clean_n"] = bi + 1, moments.n_embeddings
        _trim_heap()
        rate = (moments.n_embeddings - emb_at_start) / max(time.monotonic() - t_loop, 1e-9)
        eta = (plan.total_embeddings - moments.n_embeddings) / rate if rate > 0 else None
        report(Progress("compute", int(done_at[bi]), total, moments.n_embeddings, rate, eta))
        if saver.due() and bi + 1 < plan.n_batches:
            saver.save(accs, bi + 1, extra())

    report(Progress("compute", int(done_at[first - 1]) if first else 0, total, moments.n_embeddings, 0.0, None))
    try:
        run_range(source, plan, accs, first, plan.n_batches, on_batch=on_batch, should_cancel=cancelled)
    except BaseException:
        clean = moments.n_embeddings == pos["clean_n"]  # no piece of an unfinished batch was added
        if not clean and getattr(source, "completed_batch", None) == pos["next"]:
            pos["next"], clean = pos["next"] + 1, True  # interrupted in the next forward: that batch is whole
        if clean and ckpt_path is not None and pos["next"] > (resumed_from or 0):
            try:
                saver.save(accs, pos["next"], extra())
            except Exception:  # noqa: BLE001 - the original error matters more
                pass
        raise

    # ---- publish
    n_embeddings = moments.n_embeddings
    notes = {**source.notes(), "resumed_from_batch": resumed_from, "memory": memory_note(ctx)}
    try:
        path = publish_run(out_path, plan=plan, source=source, ctx=ctx, accs=accs, notes=notes, overwrite=overwrite,
                           seconds=seconds_before + (time.monotonic() - t_start),
                           progress=_publish_progress(report, total, n_embeddings))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM mid-write: keep every batch, the rerun only writes
        if ckpt_path is not None:
            try:
                saver.save(accs, plan.n_batches, extra())
            except Exception:  # noqa: BLE001 - the interruption matters more
                pass
        raise
    if ckpt_path is not None:
        ckpt_path.unlink(missing_ok=True)
    report(Progress("done", total, total, n_embeddings, 0.0, 0.0))
    return path


def _publish_progress(report, total: int, n_embeddings: int):
    """publish_run's ``progress(stage, done, total, unit, detail)`` -> Progress events with an ETA."""
    clock = _PhaseClock(report)

    def progress(stage: str, done: int, n: int, unit: str, detail: str = "") -> None:
        clock(stage, done, n, unit, detail, sentences_done=total, sentences_total=total, embeddings=n_embeddings)

    return progress


def _compute_on_ray(cfg, dd, corpus, loaded, out_path, ckpt_path, report, overwrite, cancelled, t_start,
                    checkpoint_every_s):
    """The Ray executor (``ray_executor.RayPool``): the actors tokenize the corpus in shares for the plan,
    then run its batches; the driver merges their partial states and publishes as in one process."""
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.memory import run_budget, shape_of_loaded
    from normvar_core.pipeline.plan import make_plan
    from normvar_core.pipeline.publish import publish_run
    from normvar_core.pipeline.execute.on_ray import RayPool
    from normvar_core.pipeline.sources import TransformerSource

    pool = RayPool(cfg, dd.root)
    try:
        plan = make_plan(cfg, corpus, loaded.tokenizer, num_hidden_states=int(loaded.info.num_hidden_states),
                         max_length=int(loaded.info.max_length), device_type=loaded.device.type, encode=pool.encode)
        del corpus
        source = TransformerSource(loaded, plan.layers)
        ctx = RunContext(cfg=cfg, layers=plan.layers, dim=source.info.dim, device=loaded.device, plan=plan,
                         tokens=plan.tokens)
        # what fits: the driver's figure decides for every actor (they get its decisions with the plan)
        ctx.memory = run_budget(cfg, ctx, shape=shape_of_loaded(loaded), device=loaded.device.type, dtype=cfg.dtype)
        fingerprint = dict(plan.fingerprint(), weights_hash=loaded.info.weights_hash)
        total = len(plan.sentences)
        done_at = plan.sentences_done_at()
        t_loop = time.monotonic()

        def progress(batches_done: int, n_batches: int) -> None:
            emb = int(plan.total_embeddings * batches_done / max(n_batches, 1))
            rate = emb / max(time.monotonic() - t_loop, 1e-9)
            report(Progress("compute", int(done_at[batches_done - 1]) if batches_done else 0, total, emb, rate,
                            (plan.total_embeddings - emb) / rate if rate > 0 else None))

        report(Progress("compute", 0, total, 0, 0.0, None))
        accs, notes = pool.run(plan, ctx, checkpoint=ckpt_path, fingerprint=fingerprint, progress=progress,
                               should_cancel=cancelled, checkpoint_every_s=checkpoint_every_s)
    finally:
        pool.close()
    notes = {**notes, "memory": memory_note(ctx)}
    path = publish_run(out_path, plan=plan, source=source, ctx=ctx, accs=accs, notes=notes, overwrite=overwrite,
                       seconds=time.monotonic() - t_start,
                       progress=_publish_progress(report, total, accs["moments"].n_embeddings))
    if ckpt_path is not None:
        ckpt_path.unlink(missing_ok=True)
    report(Progress("done", total, total, accs["moments"].n_embeddings, 0.0, 0.0))
    return path


def memory_note(ctx) -> dict:
    """The run row's notes.memory: the planned peak, the memory it was planned against, whether it fit."""
    mp = ctx.memory
    return {} if mp is None else {"total_bytes": mp.total_bytes, "memory_bytes": mp.memory_bytes, "fits": mp.fits}


_LIBC: list = []  # [libc] once _limit_heap_growth found glibc, else [None]


def _limit_heap_growth() -> None:
    """glibc raises its mmap threshold dynamically once a large block is freed, after which every
    batch's activations (all shapes differ) come from the heap and fragment it: peak RSS then grows
    with the number of batches. A small fixed threshold (128 KiB) avoided that but mapped every
    temporary of every batch afresh: the page faults cost ~10 % of a MiniLM run's CPU in system
    time. So: a fixed 32 MiB threshold (M_MMAP_THRESHOLD; glibc's dynamic maximum, so the
    per-batch temporaries below it reuse heap pages) and ``_trim_heap()`` (malloc_trim(0):
    freed heap pages back to the OS) after every batch, which bounds the heap as before."""
    if _LIBC or not sys.platform.startswith("linux") or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        _LIBC.append(libc)
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to do
        _LIBC.append(None)


def _trim_heap() -> None:
    """malloc_trim(0) when ``_limit_heap_growth`` set glibc up: the batch's freed pages back to the OS."""
    if _LIBC and _LIBC[0] is not None:
        _LIBC[0].malloc_trim(0)





# ============================================================================ CLI progress
class TqdmProgress:
    """A ``progress`` callback drawing tqdm bars on stderr, one per phase: plan (steps), forward
    (sentences, embeddings/s, ETA), finalize (measures: spectra, TwoNN ...), write (tables)."""

    def __init__(self, file=None, disable: bool | None = None):
        self.file = file or sys.stderr
        self.disable = disable
        self.bar = None
        self.phase = None

    def _open(self, p: Progress) -> None:
        from tqdm import tqdm

        self.close()
        self.phase = p.phase
        if p.phase == "done":
            return
        self.bar = tqdm(total=p.total or None, initial=p.done, unit=p.unit or "step", file=self.file,
                        disable=self.disable, desc=f"normvar {p.phase}", dynamic_ncols=True, mininterval=0.5)

    def __call__(self, p: Progress) -> None:
        if p.phase != self.phase:
            self._open(p)
        if self.bar is None:
            return
        if p.total and self.bar.total != p.total:
            self.bar.total = p.total
        self.bar.update(max(0, p.done - self.bar.n))
        if p.phase == "forward":
            self.bar.set_postfix_str(f"{p.embeddings:,} emb, {p.emb_per_s:,.0f} emb/s", refresh=False)
        elif p.detail:
            eta = f", ETA {p.eta_s:.0f} s" if p.eta_s is not None else ""
            self.bar.set_postfix_str(f"{p.detail}{eta}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.refresh()
            self.bar.close()
            self.bar = None


__all__ = ["compute_run", "Progress", "default_run_name", "run_path_for", "TqdmProgress", "check_destination"]
