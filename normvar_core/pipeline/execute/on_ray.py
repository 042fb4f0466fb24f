"""The Ray executor: a run's tokenization and batch ranges spread over Ray actors, merged exactly.

``compute_on_ray`` is the strategy's entry (``local.compute_run`` calls it for ``--executor ray``):
the run's setup is ``prepare.prepare``'s, with the plan tokenized by the pool, and the driver
publishes with ``publish.publish`` as in one process. Starting Ray: ``ray_cluster.py``.

``RayPool`` starts (or joins) Ray and K actors, each loading the model once (one actor per GPU where
there are GPUs). The driver loads no weights: it reads the tokenizer and config, and asks the first actor
for what needs the weights (``ray_model.ActorModel``: the model's description, its App. I tables, the
memory figure, the measures' early pass results, computed there once and sent to every actor with the plan). Then:

1. **Plan.** The driver streams the corpus file once (hash, .gz decompressed) and cuts its bytes into
   one range per actor at record boundaries; each range reaches its actor through Ray's object store
   (actors never open the corpus path), the actors parse, sample and tokenize their ranges in three
   exchanges that make the whole file's selection (``ray_corpus``; CSV: the driver reads it and shares
   the kept sentences, ``corpus_shares``), and the driver builds the plan from the merged encoding.
2. **Pass.** The plan goes to the actors as plain arrays (``plan_payload``, one object shared by all).
   The batches are cut into about 4·K ranges of equal token counts, handed to the actors one at a time
   as each finishes its previous one. An actor accumulates *every* range it runs into one partial
   state; the driver asks each actor for it (``flush``) when the actor has nothing left to do (and
   every ``checkpoint_every_s`` while it runs), merges it in place into one running state
   (``Measure.merge_from``: exact, any order) and checkpoints that merged state with the batch
   ranges it covers. The flush brings only the small arrays; every array of 3+ dimensions (per-type
   means and Σu, scatters, samples) stays with the actor and is fetched one layer block at a time
   (``ray_shard.Shard.piece``, in its own concurrency group, so it is served while the actor runs its next
   range), merged and dropped before the next: the driver holds the merged state plus one layer block,
   whatever K.

Faults: actors restart (``max_restarts``) and the task that was running is retried
(``max_task_retries``). A restarted actor has lost the ranges it held unflushed: its ``flush`` lists
the ranges its state covers, and the driver runs the missing ones again (ranges are pure functions of
the plan, so the result is unchanged). An actor that dies while the driver is fetching its flushed
blocks leaves a half-merged state: the driver drops it for its last checkpoint (the state before that
merge) or, without one, for an empty state, and runs the ranges not covered again. A restarted driver
loads the merged checkpoint and runs only the batches it does not cover. Ray is an optional extra
(``requirements-ray.txt``); it is imported only here and in the actors (``ray_shard``). Without
``--ray-address`` the run starts a private local Ray (``address="local"``), never one it finds on the
machine.

Progress: every shard reports each finished batch to a small counter actor (fire-and-forget); the
driver polls it every ``PROGRESS_EVERY_S`` while it waits, so a run's progress moves batch by batch
as in one process, and a cancelled job kills its actors at the next poll.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from normvar_core.errors import CancelledError, NormvarError
from normvar_core.pipeline.batches import batch_token_counts
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.corpus.shares import merge_encoded, split_shares
from normvar_core.pipeline.execute.plan_payload import plan_payload
from normvar_core.pipeline.execute.prepare import prepare
from normvar_core.pipeline.execute.progress import BatchCounter, ForwardClock, Progress
from normvar_core.pipeline.execute.ray_cluster import check_workers, start_ray
from normvar_core.pipeline.execute.ray_corpus import cut_for_actors, read_on_actors
from normvar_core.pipeline.execute.ray_merge import TRANSFER, MergedState, Pieces
from normvar_core.pipeline.execute.ray_model import ActorModel
from normvar_core.pipeline.execute.ray_shard import Shard

RANGES_PER_ACTOR = 4
MAX_ROUNDS = 4  # rounds of re-running ranges lost with a restarted actor before giving up
PROGRESS_EVERY_S = 0.5


def missing_ranges(plan, covered: list[tuple[int, int]], pieces: int) -> list[tuple[int, int]]:
    """The batches not in ``covered``, as about ``pieces`` contiguous ranges of equal token counts."""
    todo = np.ones(plan.n_batches, bool)
    for a, b in covered:
        todo[a:b] = False
    if not todo.any():
        return []
    tokens = batch_token_counts(plan.batches).astype(np.float64)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], todo.astype(np.int8), [0]])))
    spans = list(zip(edges[::2].tolist(), edges[1::2].tolist()))
    total = float(tokens[todo].sum()) or 1.0
    out = []
    for a, b in spans:
        k = max(1, min(b - a, int(round(pieces * float(tokens[a:b].sum()) / total))))
        cum = np.cumsum(tokens[a:b])
        cuts = np.searchsorted(cum, np.linspace(0, cum[-1], k + 1)[1:-1], side="right") + a
        bounds = sorted(set([a, *cuts.tolist(), b]))
        out += [(x, y) for x, y in zip(bounds, bounds[1:]) if y > x]
    return out


class RayPool:
    """Ray started (or joined) with K model-holding actors: ``encode`` for the plan, ``run`` for the pass."""

    def __init__(self, cfg, data_dir: Path):
        self.cfg = cfg
        workers = int(cfg.workers or 2)
        self.ray = ray = start_ray(cfg.ray_address, workers)
        gpus, workers = actor_gpus(cfg, ray.cluster_resources().get("GPU", 0), workers)
        check_workers(ray, workers, gpus)
        actor_cls = ray.remote(
            num_gpus=gpus, num_cpus=1, max_restarts=2, max_task_retries=2, concurrency_groups={TRANSFER: 1}
        )(Shard)
        self.actors = [
            actor_cls.remote(actor_config(cfg, i), str(data_dir), torch.get_num_threads()) for i in range(workers)
        ]
        self.counter = ray.remote(num_cpus=0)(BatchCounter).remote()
        self.tokenize_cpu_s: list[float] = []
        self.read_cpu_s: list[float] = []  # each actor's CPU s on its corpus range (``read_corpus``)
        self.cut = None  # the driver's byte ranges of the corpus (``ray_corpus.cut_for_actors``)
        self.encoded = None  # (sentences, {(max_length, unit)}, encoding) from ``read_corpus``
        self.releases: list = []  # the merged state's release calls (``MergedState.releases``)
        self.plan_ref = None  # the plan's arrays in the object store (``boxed``)

    def close(self) -> None:
        refs = [r for r in self.releases if r is not None]
        if refs:  # a release still in flight would fail against a killed actor (a raylet error message)
            try:
                self.ray.wait(refs, num_returns=len(refs), timeout=5.0)
            except Exception:
                pass
        for a in [*self.actors, self.counter]:
            try:
                self.ray.kill(a)
            except Exception:
                pass

    def get(self, ref, what: str):
        try:
            return self.ray.get(ref)
        except Exception as exc:
            raise NormvarError(
                f"a Ray shard ({what}) failed: {str(exc).splitlines()[0][:200]}",
                fix="see the Ray logs; rerun resumes from the merged checkpoint",
            ) from None

    def read_corpus(self, cfg, data_dir):
        """The run's ``CorpusText``, parsed, selected and tokenized by the actors from byte ranges the
        driver cut (``ray_corpus``; CSV: read here). Its encoding is kept for ``encode``."""
        if self.cut is None:
            return load_sentences(cfg, data_dir)
        corpus, parts = read_on_actors(self.ray, self.actors, cfg, self.cut, data_dir)
        self.cut = None
        self.tokenize_cpu_s = [round(float(p["cpu_s"]), 4) for p in parts]
        self.read_cpu_s = [round(float(p["read_cpu_s"]), 4) for p in parts]  # parse + select + tokenize
        used = {(int(p["max_length"]), str(p["unit"])) for p in parts}
        self.encoded = (list(corpus.sentences), used, merge_encoded(parts))
        return corpus

    def encode(self, sentences, *, max_length: int, unit: str):
        """The encoding of ``sentences``: the actors' from ``read_corpus`` when it is theirs, else one
        contiguous share of the kept sentences per actor (``corpus_shares``)."""
        held, self.encoded = self.encoded, None
        if held is not None and held[1] == {(int(max_length), unit)} and held[0] == list(sentences):
            return held[2]
        shares = split_shares(list(sentences), len(self.actors))
        refs = [a.tokenize.remote(self.ray.put(s), int(max_length), unit) for a, s in zip(self.actors, shares)]
        parts = [self.get(r, "tokenizing") for r in refs]
        self.tokenize_cpu_s = [round(float(p["cpu_s"]), 4) for p in parts]
        return merge_encoded(parts)

    def boxed(self, plan, ctx) -> list:
        """[the plan's arrays (put in the object store once), the memory decisions of ``ctx`` (JSON)]: what an
        actor builds its plan and context from (``Shard._context``)."""
        if self.plan_ref is None:
            self.plan_ref = self.ray.put(plan_payload(plan))
        return [self.plan_ref, json.dumps(memory_reasons(ctx))]

    def run(
        self,
        plan,
        ctx,
        *,
        checkpoint: Path | None,
        fingerprint: dict,
        checkpoint_every_s: float = 30.0,
        progress: Callable[[int, int], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> tuple[dict, dict]:
        """Every batch of ``plan`` through the actors; returns (merged measures, notes). See the
        module docstring. ``should_cancel()`` is polled every ``PROGRESS_EVERY_S``: when true the actors
        are killed and CancelledError raised (the merged checkpoint stays)."""
        merged = MergedState(ctx, checkpoint, fingerprint)
        self.releases = merged.releases
        resumed = merged.resume()
        early = ctx.early  # the first actor's (``ray_model.ActorModel.prime``): the same for every actor
        payload = [*self.boxed(plan, ctx), self.ray.put(dict(early)) if early else None]
        rerun = rounds = 0
        while True:
            todo = missing_ranges(plan, merged.covered, RANGES_PER_ACTOR * len(self.actors))
            if not todo:
                break
            rounds += 1
            if rounds > 1:
                rerun += len(todo)
            if rounds > MAX_ROUNDS:
                raise NormvarError(
                    f"Ray shards kept losing batch ranges ({len(todo)} still missing)",
                    fix="see the Ray logs; rerun resumes from the merged checkpoint",
                )
            self._round(plan, todo, payload, merged, checkpoint_every_s, progress, should_cancel)
        measures = merged.ensure()
        return measures, {
            "executor": "ray",
            "ray_workers": len(self.actors),
            "shards": merged.n_ranges,
            "ray_nodes": len(merged.nodes),
            "oom_splits": merged.oom,
            "resumed_batches": resumed,
            "rerun_ranges": rerun,
            "merge_rollbacks": merged.rollbacks,
            "tokenize_cpu_s": self.tokenize_cpu_s,
            "read_cpu_s": self.read_cpu_s,
        }

    def _round(self, plan, todo, payload, merged, every_s, progress, should_cancel) -> None:
        ray, actors = self.ray, self.actors
        queue = deque(todo)
        inflight: dict = {}  # ref -> (kind, actor index, range)
        running = [0] * len(actors)
        acked: set = set()  # ranges finished this round (held by an actor or merged)
        last_flush, turn = time.monotonic(), 0

        def submit_run(j: int) -> None:
            r = queue.popleft()
            inflight[actors[j].run.remote(payload, r[0], r[1], self.counter)] = ("run", j, r)
            running[j] += 1

        def submit_flush(j: int) -> None:
            inflight[actors[j].flush.remote()] = ("flush", j, None)

        def done_batches() -> int:
            held = {r for r in acked} | set(map(tuple, merged.covered))
            return min(plan.n_batches, sum(b - a for a, b in held))

        for j in range(min(len(actors), len(queue))):
            submit_run(j)
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=PROGRESS_EVERY_S)
            if should_cancel is not None and should_cancel():
                self.close()
                raise CancelledError("cancelled")
            if not ready:
                if progress is not None:
                    pending = {k: v[2] for k, v in inflight.items() if v[0] == "run"}
                    progress(
                        min(plan.n_batches, done_batches() + _in_flight(ray, self.counter, pending)), plan.n_batches
                    )
                if merged.path is not None and time.monotonic() - last_flush >= every_s:
                    busy = [j for j in range(len(actors)) if running[j]]
                    if busy:  # one actor at a time: the driver then receives one partial at a time
                        submit_flush(busy[turn % len(busy)])
                        turn += 1
                    last_flush = time.monotonic()
                continue
            kind, j, r = inflight.pop(ready[0])
            if kind == "run":
                self.get(ready[0], f"batches {r[0]}..{r[1]}")
                running[j] -= 1
                acked.add(r)
                if queue:
                    submit_run(j)
                elif not running[j]:
                    submit_flush(j)
            else:
                out = self.get(ready[0], "flush")
                merged.add(out, Pieces(ray, actors[j], out))
                del out
            if progress is not None:
                progress(done_batches(), plan.n_batches)


def compute_on_ray(target, report, should_cancel, checkpoint_every_s: float = 30.0):
    """The Ray strategy over ``prepare``'s setup: the actors start, the driver cuts the corpus into byte
    ranges that the actors parse, select and tokenize (``RayPool.read_corpus``, ``ray_corpus``), the
    plan is built from their encoding, then the actors run its batches; returns (setup, merged
    measures, notes) for ``publish.publish``, as in one process."""
    cfg, root = target.cfg, target.data_dir.root
    pools: list[RayPool] = []
    try:
        pools.append(RayPool(cfg, root))
        pools[0].cut = cut_for_actors(cfg, root, len(pools[0].actors), pools[0].ray.put)  # type: ignore[assignment]  # the cut, once made
        report(Progress("corpus", done=0, total=3, unit="steps", detail=CUT_DETAIL))
        # no checkpoint here: the pool resumes from its own merged one (``_Merged.resume``); the driver's
        # memory figure decides for every actor (they get its decisions with the plan)
        # the driver loads no weights: the tokenizer and what the first actor says of its model (``ray_model``)
        setup = prepare(
            cfg, target.data_dir, report=report, should_cancel=should_cancel, remote=ActorModel(pools[0], cfg, root)
        )
        plan = setup.plan
        clock: list = []  # the forward clock starts at the first batch in: until then the actors load the model

        def progress(batches_done: int, n_batches: int) -> None:
            if batches_done and not clock:
                clock.append(ForwardClock(report, plan))
            if clock:
                clock[0](batches_done, int(plan.total_embeddings * batches_done / max(n_batches, 1)))

        report(
            Progress(
                "model",
                sentences_total=len(plan.sentences),
                done=2,
                total=3,
                unit="steps",
                detail=f"the Ray actors load {cfg.model}",
            )
        )
        # the driver merges every actor's partial as one state, whatever their device maps (their state_dicts
        # are the whole run's: ``execute/layer_groups.py``)
        merge_ctx = dataclasses.replace(setup.ctx, places=None)
        measures, notes = pools[0].run(
            plan,
            merge_ctx,
            checkpoint=target.checkpoint,
            fingerprint=setup.fingerprint,
            progress=progress,
            should_cancel=should_cancel,
            checkpoint_every_s=checkpoint_every_s,
        )
    finally:
        for pool in pools:
            pool.close()
    return setup, measures, notes


CUT_DETAIL = "corpus cut into byte ranges"  # the progress detail once the driver has read the corpus file


def actor_gpus(cfg, cluster_gpus: float, workers: int) -> tuple[int, int]:
    """(GPUs per actor, actors): one GPU each where there are GPUs (one actor per GPU unless --workers), or
    ``--gpus-per-worker K``: K each, one actor per group of K GPUs (K = 0: CPU actors, --workers or 2)."""
    k = cfg.gpus_per_worker
    if k is None:
        gpus = 1 if cluster_gpus >= 1 else 0
        return gpus, int(cluster_gpus) if gpus and cfg.workers is None else workers
    if k > cluster_gpus:
        raise NormvarError(
            f"--gpus-per-worker {k}: the Ray cluster has {cluster_gpus:g} GPUs",
            fix=f"use at most {int(cluster_gpus)} GPUs per worker",
        )
    return int(k), int(cfg.workers or (cluster_gpus // k if k else workers))


def actor_config(cfg, index: int) -> str:
    """An actor's RunConfig (JSON): with ``--gpus-per-worker``, its replica device-mapped over its GPUs
    (``--device-map`` or auto); each actor offloads into its own subfolder of ``--offload-folder``."""
    if cfg.gpus_per_worker is None:
        return cfg.to_json()
    folder = str(Path(cfg.offload_folder) / f"actor-{index}") if cfg.offload_folder else None
    return cfg.replace(device_map=cfg.device_map or "auto", offload_folder=folder).to_json()


def memory_reasons(ctx) -> dict:
    return {} if ctx.memory is None else dict(ctx.memory.reasons)


def _in_flight(ray, counter, pending: dict) -> int:
    """Batches finished inside the ranges still running (0 if the counter does not answer)."""
    try:
        got = ray.get(counter.get.remote(), timeout=5)
    except Exception:
        return 0
    return sum(min(got.get(a, 0), b - a) for a, b in pending.values())


__all__ = ["compute_on_ray", "CUT_DETAIL", "RayPool", "missing_ranges", "actor_gpus", "PROGRESS_EVERY_S"]
