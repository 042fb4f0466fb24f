"""A run's setup, written once for both strategies (``local.py`` in this process, ``on_ray.py`` on Ray actors).

``preflight.run_target`` makes the checks that need no model (the configuration valid and named, its inputs,
the run's file free, the checkpoint path writable); ``prepare`` then takes a run's steps up to its first batch:

    corpus (corpus/read.py) -> model (models/load.py) -> plan (plan.py: tokenize, count, sample)
    -> state source (sources.py) -> context + memory plan (contracts.py, memory/plan.py)

(the Ray driver: the corpus and the model's weights stay with the actors, ``ray_model.ActorModel``)

and returns them as one ``RunSetup``. ``publish.publish`` ends a run the same way for both strategies: the
run file written atomically (execute/publish.py), the checkpoint removed, "done" reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normvar_core.config import RunConfig, run_path_for
from normvar_core.datadir import DataDir
from normvar_core.errors import CancelledError, NormvarError
from normvar_core.pipeline import models
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.execute import checkpoint as ckpt
from normvar_core.pipeline.execute import heap
from normvar_core.pipeline.execute.progress import PhaseClock, Progress
from normvar_core.pipeline.measures import early_measures, run_early, start_early
from normvar_core.pipeline.memory.per_device import device_limits, plan_placed
from normvar_core.pipeline.memory.plan import run_budget, with_devices
from normvar_core.pipeline.model_shape import shape_of_loaded
from normvar_core.pipeline.run_plan import make_plan, tokenized_cache
from normvar_core.pipeline.sources import TransformerSource


@dataclass
class RunSetup:
    """Everything a strategy needs before the first batch. ``ctx.memory`` is the memory plan (which
    measures fit); ``fingerprint`` the plan's and the weights' (a checkpoint resumes only under
    it); ``resumed``: (partial state, meta) of the checkpoint this run resumes, if any."""

    cfg: RunConfig
    loaded: Any  # models.LoadedModel
    plan: Any  # run_plan.RunPlan
    source: Any  # sources.TransformerSource
    ctx: RunContext
    fingerprint: dict
    resumed: tuple | None = None

    @property
    def total(self) -> int:
        """Sentences in the run."""
        return len(self.plan.sentences)


def prepare(
    cfg: RunConfig,
    data_dir=None,
    *,
    report: Callable[[Progress], Any] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    checkpoint: Path | None = None,
    remote: Any = None,
    checkpoint_every_s: float = ckpt.CHECKPOINT_EVERY_S,
    fresh: bool = False,
) -> RunSetup:
    """Corpus → model → plan → source → context and memory plan for ``cfg`` (module docstring).

    ``report`` gets the plan phase's three steps; ``should_cancel()`` is polled between them.
    ``checkpoint``: resume from it when its fingerprint matches, refuse it in one line otherwise (``fresh``: start
    over; ``checkpoint.load``), its contents checked against the plan before the pass (the memory plan then keeps
    exactly
    the measures it holds; a checkpoint of unfinished early passes resumes them, and the early passes
    save one every ``checkpoint_every_s`` and when interrupted or cancelled: ``early_passes``). ``remote``: the Ray
    strategy's driver side (``ray_model.ActorModel``): the corpus read and tokenized by the actors, the model
    described by them (this process reads its tokenizer and config, never its weights), the measures' early
    passes run by one actor."""
    dd = DataDir.at(data_dir)
    report = report or (lambda p: None)

    def check_cancel() -> None:
        if should_cancel is not None and should_cancel():
            raise CancelledError("cancelled")

    report(Progress("corpus", done=0, total=3, unit="steps", detail="read the corpus"))
    corpus = remote.read_corpus() if remote is not None else load_sentences(cfg, dd.root)
    if not corpus.sentences:
        raise NormvarError(
            "no sentences left after filtering the corpus",
            fix="check the corpus, --max-words, --sample-frac and --max-sentences",
        )
    check_cancel()
    total = len(corpus.sentences)
    report(Progress("model", sentences_total=total, done=1, total=3, unit="steps", detail=f"loading {cfg.model}"))
    # read through the package, where the tests replace the loader
    loaded = remote.describe() if remote is not None else models.load_model(cfg, dd.root)
    if cfg.dtype == "auto":  # the dtype it loaded at (``models.load.resolve_dtype``): the plan and the row say it
        cfg = cfg.replace(dtype=str(loaded.info.dtype))
    check_cancel()
    report(Progress("tokenize", sentences_total=total, done=2, total=3, unit="steps", detail="tokenize and count"))
    plan = make_plan(
        cfg,
        corpus,
        loaded.tokenizer,
        num_hidden_states=int(loaded.info.num_hidden_states),
        max_length=int(loaded.info.max_length),
        device_type=loaded.device.type,
        encode=remote.encode if remote is not None else None,
        cache=tokenized_cache(dd.root),
    )
    del corpus
    source = remote.source(loaded, plan.layers) if remote is not None else TransformerSource(loaded, plan.layers)
    ctx = RunContext(
        cfg=cfg,
        layers=plan.layers,
        dim=source.info.dim,
        device=source.state_device,
        plan=plan,
        tokens=plan.tokens,
        places=source.places,
    )
    fingerprint = dict(plan.fingerprint(), weights_hash=loaded.info.weights_hash)
    resumed = ckpt.load(checkpoint, fingerprint, fresh=fresh) if checkpoint is not None else None
    early_states = ckpt.early_states_of(resumed)
    if early_states is not None:  # the early passes were interrupted: they go on
        resumed = None
    if resumed is not None:  # every measure asked for is in it (or was left out by its run): refused before the pass
        ckpt.check_asked(checkpoint, resumed[0], resumed[1], cfg)
    ctx.memory = (remote.memory_plan if remote is not None else memory_plan)(cfg, ctx, loaded, source, resumed)
    refuse_unless_fits(ctx.memory)
    if resumed is not None:  # every measure kept, with its planned keys and shapes: refused before the pass
        ckpt.check_planned(checkpoint, resumed[0], ctx, [n for n in ctx.memory.measures if n not in ctx.memory.dropped])
    if remote is not None:  # the early passes run by one actor, for all (``ray_model``)
        remote.prime(ctx, source)
    else:  # the measures' early passes, here (a resumed pass has their results)
        ctx.early.update(ckpt.early_results_of(resumed, ctx))
        early_passes(
            ctx,
            source,
            states=early_states,
            report=report,
            check_cancel=check_cancel,
            saver=ckpt.Checkpointer(checkpoint, fingerprint, checkpoint_every_s),
        )
    return RunSetup(cfg, loaded, plan, source, ctx, fingerprint, resumed)


def refuse_unless_fits(mp) -> None:
    """A run its memory plan says will not fit even with its drops is refused before the pass, in one line with the
    plan's fixes (``MemoryPlan.suggestions``), rather than killed by the kernel part-way through."""
    if mp is None or mp.fits:
        return
    fixes = "; ".join(mp.suggestions) or "a larger device, fewer --layers or a smaller --batch-size"
    raise NormvarError(
        f"this run would not fit in memory: it {mp.summary()} (normvar plan with the same options shows each part)",
        fix=fixes,
    )


def early_passes(ctx: RunContext, source, *, states, report, check_cancel, saver) -> None:
    """The measures' early passes (``measures.run_early``) with their batches counted as batches done: their
    progress reported, a checkpoint of their running states (``checkpoint.early_key``) saved every
    ``saver.every_s`` seconds and when interrupted or cancelled after a batch, ``check_cancel`` polled after each
    batch."""
    passes = start_early(ctx, source, reuse=True, states=states)
    planned = sum(cls.early_pass.planned(ctx)["batches"] for cls in early_measures(ctx) if cls.name in passes)  # type: ignore[union-attr, misc]  # early_measures: each has an early pass
    start = sum(ep.done for ep in passes.values())
    label = " and ".join(dict.fromkeys(ep.label for ep in passes.values()))
    clock = PhaseClock(report)  # rate and ETA of the early batches

    def done() -> int:
        return sum(ep.done for ep in passes.values())

    def states_now() -> dict:
        return {name: ep.state_dict() for name, ep in passes.items() if ep.done}  # those begun

    def on_batch(_) -> None:
        now = done()
        clock(
            "early", now - start, max(planned, now) - start, "batches", label, sentences_total=len(ctx.plan.sentences)
        )
        if saver.due() and not all(ep.finished for ep in passes.values()):
            saver.periodic(saver.save_early, states_now(), now, planned)
        check_cancel()

    try:
        run_early(ctx, passes, on_batch=on_batch)
        heap.trim_heap()  # the early batches' freed states back to the OS (the pass's trims measure from here)
    except BaseException as exc:
        if done() > start:
            ckpt.note_on(
                exc,
                saver.exit_save(
                    saver.save_early, states_now(), done(), planned, batches=f"{done()} batches of the early pass"
                ),
            )
        raise


def memory_plan(cfg: RunConfig, ctx: RunContext, loaded, source, resumed):
    """The memory plan of a run over the model loaded here (``run_budget``); with --device-map, what each
    device holds decides the drops (``memory.per_device.plan_placed``)."""
    ctx.memory = run_budget(
        cfg,
        ctx,
        shape=shape_of_loaded(loaded),
        device=loaded.device.type,
        dtype=cfg.dtype,
        resume_names=set(resumed[0].states) if resumed is not None else None,
    )
    if loaded.info.device_map and resumed is None:
        dmap = loaded.info.device_map
        ctx.memory = with_devices(
            ctx.memory,
            plan_placed(ctx, shape_of_loaded(loaded), loaded.model, dmap, device_limits(dmap), dtype=cfg.dtype),
        )
    return ctx.memory


__all__ = ["RunSetup", "prepare", "run_path_for"]
