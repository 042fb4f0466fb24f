"""``compute_run``: corpus + model -> one published run file, by one of two strategies over one setup

    run_target (preflight.py) + prepare (prepare.py: corpus -> model -> plan -> source -> context)
    -> the batches: here (``run_range`` in this process) or on Ray actors (``on_ray.compute_on_ray``)
    -> publish (execute/publish.py, atomically)

The checks that need no model come first (name taken, destination writable, corpus readable);
then the model is loaded, the plan built, the batches run through every measure and the run
published atomically. Checkpoints (``checkpoint=PATH``): every ``checkpoint_every_s`` seconds, and
when cancelled or interrupted between batches, the partial state of the batches done is saved
(``checkpoint.py``: the state, its file and the saver); a run resumes from it when its plan fingerprint matches, and the
published
statistics equal those of an uninterrupted run exactly. Nothing is published on any error;
``should_cancel()`` is polled between batches and raises ``errors.CancelledError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from normvar_core.config import RunConfig
from normvar_core.errors import CancelledError
from normvar_core.pipeline.execute import heap
from normvar_core.pipeline.execute.blas_threads import one_blas_thread
from normvar_core.pipeline.execute.checkpoint import CHECKPOINT_EVERY_S, Checkpointer, early_meta, load_partial, note_on
from normvar_core.pipeline.execute.on_ray import compute_on_ray
from normvar_core.pipeline.execute.partials import Counted, build_measures, run_range
from normvar_core.pipeline.execute.preflight import RunTarget, run_target
from normvar_core.pipeline.execute.prepare import RunSetup, prepare
from normvar_core.pipeline.execute.progress import ForwardClock, Progress
from normvar_core.pipeline.execute.publish import publish
from normvar_core.run_lock import computing_all


def compute_run(
    cfg: RunConfig,
    data_dir=None,
    *,
    overwrite: bool = False,
    progress: Callable[[Progress], Any] | None = None,
    checkpoint=None,
    checkpoint_every_s: float = CHECKPOINT_EVERY_S,
    should_cancel: Callable[[], bool] | None = None,
    out_dir=None,
    fresh: bool = False,
    before_publish: Callable[[], bool] | None = None,
) -> Path:
    """Compute the run described by ``cfg`` and publish ``<out_dir or runs/>/<name>.duckdb``.

    Returns the published path. Raises NormvarError (bad input, name taken, OOM on a single
    sentence, a checkpoint that is not this run's) or CancelledError; nothing is published then. ``out_dir``
    overrides runs/ (CLI --out); ``fresh``: start over, replacing a checkpoint of another configuration.
    ``should_cancel`` is polled between batches and through the finalize; ``before_publish()``, once the run file
    is written but not yet published, says whether it may be (``publish.publish``)."""
    target = run_target(cfg, data_dir, out_dir=out_dir, overwrite=overwrite, checkpoint=checkpoint, fresh=fresh)
    return compute_target(
        target,
        progress=progress,
        checkpoint_every_s=checkpoint_every_s,
        should_cancel=should_cancel,
        before_publish=before_publish,
    )


def compute_target(
    target: RunTarget,
    *,
    progress: Callable[[Progress], Any] | None = None,
    checkpoint_every_s: float = CHECKPOINT_EVERY_S,
    should_cancel: Callable[[], bool] | None = None,
    before_publish: Callable[[], bool] | None = None,
) -> Path:
    """``compute_run`` for a target ``preflight.run_target`` has checked (``normvar compute`` checks it before its
    start line): the run computed and published, its files locked meanwhile."""
    t_start = time.monotonic()
    # a second compute of this output, this name (in the data directory) or this checkpoint is refused now
    with computing_all(target.locked):
        return _compute_target(target, progress, should_cancel, checkpoint_every_s, t_start, before_publish)


def _compute_target(
    target: RunTarget, progress, should_cancel, checkpoint_every_s: float, t_start: float, before_publish=None
) -> Path:
    report = progress or (lambda p: None)
    cancelled = should_cancel or (lambda: False)
    if target.cfg.executor == "ray":
        setup, measures, notes = compute_on_ray(target, report, cancelled, checkpoint_every_s)
        return publish(
            target,
            setup,
            measures,
            notes,
            seconds=time.monotonic() - t_start,
            report=report,
            should_cancel=cancelled,
            before_publish=before_publish,
        )
    heap.reuse_heap()  # the forward passes run here (a Ray driver merges: glibc's defaults, as measured there)
    with one_blas_thread():  # torch owns the cores: numpy's BLAS threads would spin on them (``blas_threads``)
        setup = prepare(
            target.cfg,
            target.data_dir,
            report=report,
            should_cancel=cancelled,
            checkpoint=target.checkpoint,
            checkpoint_every_s=checkpoint_every_s,
            fresh=target.fresh,
        )
        try:
            return _compute_here(target, setup, report, cancelled, checkpoint_every_s, t_start, before_publish)
        finally:
            heap.release_heap()  # the run's freed heap back to the OS (a worker process lives on)


def _compute_here(
    target: RunTarget, setup: RunSetup, report, cancelled, every_s: float, t_start: float, before_publish=None
) -> Path:
    """The local strategy: every batch in this process, checkpointed (module docstring)."""
    plan, source = setup.plan, setup.source
    if setup.resumed is not None:
        partial, meta = setup.resumed
        measures = load_partial(build_measures(setup.ctx), partial, target.checkpoint)
        first, seconds_before, resumed_from = partial.stop, float(meta.get("seconds", 0.0)), partial.stop
        source.oom_splits, source.max_rows = int(meta.get("oom_splits", 0)), meta.get("max_rows")
    else:
        measures, first, seconds_before, resumed_from = build_measures(setup.ctx), 0, 0.0, None
    count = Counted(plan.counted_before(first))  # the run's counted positions: those of the batches done
    saver = Checkpointer(target.checkpoint, setup.fingerprint, every_s)
    pos = {"next": first, "clean_n": count.n}
    clock = ForwardClock(report, plan, count.n)
    early = early_meta(setup.ctx)  # the early passes' results: a resumed run takes them from the checkpoint

    def extra() -> dict:
        return {
            "seconds": seconds_before + (time.monotonic() - t_start),
            "oom_splits": source.oom_splits,
            "max_rows": source.max_rows,
            "dropped": []
            if setup.ctx.memory is None
            else list(setup.ctx.memory.dropped),  # what a resume may miss (``check_asked``)
            **early,
        }

    def on_batch(bi: int) -> None:
        pos["next"], pos["clean_n"] = bi + 1, count.n
        heap.trim_if_grown()
        clock(bi + 1, count.n)
        if saver.due() and bi + 1 < plan.n_batches:
            saver.periodic(saver.save, measures, bi + 1, extra())

    clock(first, count.n, detail=f"resuming from {first} of {plan.n_batches} batches" if first else "")
    try:
        run_range(
            source,
            plan,
            measures,
            first,
            plan.n_batches,
            on_batch=on_batch,
            should_cancel=cancelled,
            count=count,
            on_layer=clock.within,  # the sentences of a long batch counted as its layers are folded in
        )
    except BaseException as exc:
        clean = count.n == pos["clean_n"]  # no piece of an unfinished batch was begun
        if not clean and getattr(source, "completed_batch", None) == pos["next"]:
            pos["next"], clean = pos["next"] + 1, True  # interrupted in the next forward: that batch is whole
        if clean and pos["next"] > (resumed_from or 0):
            note_on(
                exc,
                saver.exit_save(
                    saver.save, measures, pos["next"], extra(), batches=f"{pos['next']} of {plan.n_batches} batches"
                ),
            )
        raise
    notes = {**source.notes(), "resumed_from_batch": resumed_from}
    try:
        return publish(
            target,
            setup,
            measures,
            notes,
            seconds=seconds_before + (time.monotonic() - t_start),
            report=report,
            should_cancel=cancelled,
            before_publish=before_publish,
        )
    except (KeyboardInterrupt, CancelledError) as exc:  # mid-finalize or mid-write: keep every batch, a rerun writes
        note_on(
            exc, saver.exit_save(saver.save, measures, plan.n_batches, extra(), batches=f"all {plan.n_batches} batches")
        )
        raise


__all__ = ["compute_run", "compute_target"]
