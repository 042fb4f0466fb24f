"""Stage 5 — publish: measures' results -> one run file (``runs.writer.write_tables``); ``publish`` ends both
strategies of a compute (the local one and Ray's): the run file written, the checkpoint removed, "done" reported.

The run row (``runs.record.RunRecord``) says where the states came from (``source``), which
measures the run holds, the model, the corpus and the full RunConfig (enough to reproduce it);
every measure contributes its own tables.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import platform
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from normvar_core import __version__
from normvar_core.constants import UNK_FLAG
from normvar_core.errors import CancelledError
from normvar_core.pipeline.batches import batch_sizes
from normvar_core.pipeline.contracts import RunContext, StateSource
from normvar_core.pipeline.execute import heap
from normvar_core.pipeline.execute.checkpoint import remove_own
from normvar_core.pipeline.execute.layer_groups import gather
from normvar_core.pipeline.execute.preflight import RunTarget
from normvar_core.pipeline.execute.prepare import RunSetup
from normvar_core.pipeline.execute.progress import Progress, publish_progress
from normvar_core.pipeline.measures import Measure, skip_reasons
from normvar_core.pipeline.measures.layerview import LAYER_DONE
from normvar_core.runs.declared import NOTES_KEY, declarations
from normvar_core.runs.record import RunRecord
from normvar_core.runs.tables import sentence_length_table, sentences_table
from normvar_core.runs.writer import write_tables


def versions() -> dict[str, str]:
    import duckdb
    import torch
    import transformers

    return {
        "normvar": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "duckdb": duckdb.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def publish_run(
    out_path: Path,
    *,
    plan,
    source: StateSource,
    ctx: RunContext,
    measures: dict[str, Measure],
    seconds: float,
    notes: dict,
    overwrite: bool = False,
    source_kind: str = "model",
    progress=None,
    commit: Callable[[], None] | None = None,
) -> Path:
    """Finish every measure, build the run row and write + publish the run file.

    The results are computed in two threads while this one writes the tables as they come (DuckDB's
    insert and numpy's arithmetic both release the GIL: the write overlaps the results). One thread
    finishes the measures one after another in registry order, so one that ``uses_results`` of an
    earlier one gets them; the other finishes those that say ``finalize_in_background`` (the geometry:
    spectra, TwoNN, Razzhigaev et al.'s batches), whose tables are written last, then the run row.
    ``progress(stage, done, total, unit, detail)``: stage "finalize" as each measure's result is ready
    (unit "measures"), "write" before each table once every result is ready (unit "tables"). ``commit()`` is
    called once every table is in the temp file, before the run row is written and the file published: the point
    of no return (it raises to publish nothing, the temp file removed)."""
    from concurrent.futures import ThreadPoolExecutor

    report = progress or (lambda *a: None)
    names = list(measures)
    later = [n for n in names if measures[n].finalize_in_background and not measures[n].uses_results]
    done = itertools.count(1)  # next() is atomic: the two threads count their results apart
    results: dict = {}
    ready = {n: threading.Event() for n in names}

    progress_done = [0]  # measures done so far, as the layer lines say it

    def finish(name: str):
        measure = measures[name]

        def on_layer(k: int, n: int, what: str) -> None:  # a measure's layer-by-layer work, as it goes
            report("finalize", progress_done[0], len(names), "measures", f"{measure.title}: {what} {k} of {n}")

        token = LAYER_DONE.set(on_layer)
        try:
            if measure.uses_states:  # their states are final: no need to wait for their results
                measure.take_states({u: measures[u] for u in measure.uses_states if u in measures})
            if measure.uses_results:  # finished earlier in the same thread (registry order) or in the other one
                for u in measure.uses_results:
                    if u in ready:
                        ready[u].wait()
                measure.take_results({u: results[u] for u in measure.uses_results if u in results})
            results[name] = out = measure.result()
        finally:
            LAYER_DONE.reset(token)
            ready[name].set()
        progress_done[0] = next(done)
        report("finalize", progress_done[0], len(names), "measures", measure.title)
        return out

    report("finalize", 0, len(names), "measures", " · ".join(measures[n].title for n in later) or "results")
    with (
        ThreadPoolExecutor(1, thread_name_prefix="normvar-results") as serial,
        ThreadPoolExecutor(1, thread_name_prefix="normvar-finalize") as side,
    ):
        futures = {
            n: (side if n in later else serial).submit(finish, n) for n in later + [n for n in names if n not in later]
        }
        built: dict = {}

        def tables_of(name: str) -> dict:
            if name not in built:
                built[name] = measures[name].tables(futures[name].result(), ctx)
            return built[name]

        tables: dict = {"sentence_lengths": sentence_length_table(plan.sentence_lengths), **source.info.tables}
        for name in [n for n in names if n not in later] + later:
            for tname in measures[name].tables_written(ctx):
                tables[tname] = lambda n=name, t=tname: tables_of(n).get(t)

        def referenced_sentences():
            referenced: set[int] = set()
            for name in names:
                referenced |= measures[name].sentence_ids(futures[name].result())
            return sentences_table({i: plan.sentences[i] for i in sorted(referenced)}) if referenced else None

        tables["sentences"] = referenced_sentences

        def record() -> RunRecord:
            for name in names:
                tables_of(name)
            return run_record(plan, source, ctx, measures, results, plan.cfg, seconds, notes, source_kind)

        def on_table(done_tables: int, n_tables: int, name: str) -> None:
            if name == "run" and commit is not None:
                commit()
            if all(f.done() for f in futures.values()):
                report("write", done_tables, n_tables, "tables", name)

        return write_tables(out_path, record, tables, overwrite=overwrite, on_table=on_table)


def run_record(plan, source, ctx, measures, results, cfg, seconds, notes, source_kind) -> RunRecord:
    """The run row: the model, the corpus, the full RunConfig, counts and every measure's notes. The counts are
    the plan's (|X| per layer and |T|): a published run has fed every batch, and its measures' tables checked
    what they counted against the plan's counts before the row is built."""
    acc_notes: dict = {}
    for name, measure in measures.items():
        acc_notes.update(measure.run_meta(results[name]))
    skipped = skip_reasons(ctx, measures)
    if skipped:
        acc_notes["skipped"] = skipped
    if declared := declarations({n: (m.tables_written(ctx), m.curves) for n, m in measures.items()}):
        acc_notes[NOTES_KEY] = declared  # only when a measure declares curves or is not built in
    corpus = dict(plan.corpus_notes)
    dataset = corpus.pop("dataset", None) or {}
    model_meta = dict(source.info.meta)
    is_decoder = bool(model_meta.pop("is_decoder", False))
    record = RunRecord(
        **{k: v for k, v in model_meta.items() if k in RunRecord.__dataclass_fields__},
        layers=list(plan.layers),
        corpus_name=plan.corpus_name,
        corpus_sha256=plan.corpus_sha256,
        options=cfg.to_dict(),
        n_sentences=len(plan.sentences),
        n_truncated=plan.n_truncated,
        n_embeddings=int(plan.total_embeddings),
        n_types=int(plan.token_ids.size),
        device=str(ctx.device),
        seconds=float(seconds),
        versions=versions(),
        created_at=_dt.datetime.now(_dt.UTC),
        source=source_kind,
        accumulators=list(measures),
        sweep=cfg.sweep,
        step=cfg.step,
        unit=plan.unit,
        notes={
            "n_batches": plan.n_batches,
            "batch_size": cfg.batch_size or int(max(batch_sizes(plan.batches), default=0)),
            **notes,
            **acc_notes,
            "is_decoder": is_decoder,
            "max_length": plan.max_length,
            "unk_share": round(float(plan.unk_share), 6),
            "unk_share_text": round(float(plan.unk_share_text), 6),
            "unk_flag": bool(plan.unk_share > UNK_FLAG),
            "corpus": corpus,
        },
        dataset=dataset,
    )
    record.model = cfg.model
    record.dim = int(source.info.dim)
    record.num_layers = int(source.info.num_hidden_states) - 1
    record.dtype = cfg.dtype
    return record


def memory_note(ctx) -> dict:
    """The run row's notes.memory: the planned peak, the memory it was planned against, whether it fit."""
    mp = ctx.memory
    return {} if mp is None else {"total_bytes": mp.total_bytes, "memory_bytes": mp.memory_bytes, "fits": mp.fits}


def publish(
    target: RunTarget,
    setup: RunSetup,
    measures: dict,
    notes: dict,
    *,
    seconds: float,
    report: Callable[[Progress], Any],
    should_cancel: Callable[[], bool] | None = None,
    before_publish: Callable[[], bool] | None = None,
) -> Path:
    """Write the run file (``publish.publish_run``, atomic), remove the checkpoint, report "done".

    A cancel during the finalize means it: ``should_cancel()`` is polled at every step of the finalize and of the
    temp file's write (each measure's result, each table), and a cancel there raises ``CancelledError``: nothing is
    published. Once every table is written, ``before_publish()`` (a worker's job: ``JobTable.begin_publish``)
    says whether the run may be published — False when a cancel came first — and from then on the cancel comes
    too late: the run row is written and the file published whatever is asked."""
    stop = should_cancel or (lambda: False)
    committed = [False]

    def check(_=None) -> None:
        if not committed[0] and stop():
            raise CancelledError("cancelled during the finalize; nothing was published")

    def commit() -> None:
        check()
        if before_publish is not None and not before_publish():
            raise CancelledError("cancelled during the finalize; nothing was published")
        committed[0] = True

    measures = gather(measures)  # --device-map: every layer group's state gathered on the host
    heap.trim_heap()  # the pass's kept free pages back before the results are built (the plan counts pass or publish)
    n_embeddings = setup.plan.total_embeddings  # every batch is in: the plan's count of counted positions
    shown = publish_progress(report, setup.total, n_embeddings)

    def progress(*args) -> None:
        check()
        shown(*args)

    check()
    path = publish_run(
        target.out_path,
        plan=setup.plan,
        source=setup.source,
        ctx=setup.ctx,
        measures=measures,
        notes={**notes, "memory": memory_note(setup.ctx)},
        overwrite=target.overwrite,
        seconds=seconds,
        progress=progress,
        commit=commit,
    )
    if target.checkpoint is not None:  # only a checkpoint normvar wrote: a link or a file planted meanwhile stays
        remove_own(target.checkpoint)
    report(Progress("done", setup.total, setup.total, n_embeddings, 0.0, 0.0))
    return path


__all__ = ["publish", "publish_run", "run_record", "versions", "memory_note"]
