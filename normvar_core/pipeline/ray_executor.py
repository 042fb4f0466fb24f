"""The Ray executor: a run's batch ranges sharded over Ray actors, partial states merged exactly.

Each actor rebuilds the run's plan from the RunConfig (the plan is deterministic: the same batches in
the same order in every process), loads the model once (one actor per GPU where there are GPUs) and
returns, per batch range, the partial state of its accumulators as plain numpy arrays
(``PartialState.arrays()``). The driver merges them (``execute.merge_partials``: exact, any order) and
publishes one ordinary run file — equal to the single-process run.

Faults: actors restart (``max_restarts``) and a range whose actor died is run again
(``max_task_retries``): ranges are pure functions of the plan, so the result is unchanged. Every
finished range is checkpointed (``checkpoint.save`` under ``<checkpoint>.shards/``), so a restarted
driver runs only the ranges still missing. Ray is an optional extra (``requirements-ray.txt``);
it is imported only here.

Progress: every shard reports each finished batch to a small counter actor (fire-and-forget); the
driver polls it every ``PROGRESS_EVERY_S`` while it waits, so a run's progress moves batch by batch
as in one process, and a cancelled job kills its actors at the next poll.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.batches import batch_token_counts

CRASH_ENV = "NORMVAR_TEST_CRASH_ONCE"  # tests: path of a marker file; the first actor to see it absent dies
DELAY_ENV = "NORMVAR_TEST_BATCH_DELAY_S"  # tests: seconds each shard sleeps after reporting a batch
PROGRESS_EVERY_S = 0.5


def shard_ranges(plan, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous batch ranges with about equal token counts."""
    tokens = batch_token_counts(plan.batches).astype(np.float64)
    cum = np.cumsum(tokens)
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], n_shards + 1)[1:-1], side="right")
    bounds = sorted(set([0, *cuts.tolist(), plan.n_batches]))
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _ray():
    try:
        import ray
    except ImportError:
        raise NormvarError("the Ray executor needs Ray", fix="pip install -r requirements-ray.txt "
                           "(or pip install 'normvar[ray]')") from None
    return ray


def check_address(address: str, timeout: float = 3.0) -> None:
    """Fail fast (one line) when nothing listens at a ``host:port`` / ``ray://host:port`` address —
    Ray itself retries for minutes before giving up."""
    import socket

    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise NormvarError(f"invalid Ray address {address!r}", fix="use HOST:PORT or ray://HOST:PORT (see `ray status`)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise NormvarError(f"Ray could not start: nothing answers at {address} ({exc.strerror or exc})",
                           fix="check --ray-address (ray status), or drop --executor ray to run in one process") from None


def preflight(cfg) -> None:
    """What can be checked before the model is loaded: Ray installed, the cluster address answering."""
    _ray()
    if cfg.ray_address:
        check_address(cfg.ray_address)


def start_ray(address: str | None, workers: int):
    ray = _ray()
    if ray.is_initialized():
        return ray
    if address:
        check_address(address)
    try:
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False)
        else:
            ray.init(num_cpus=max(workers, 1), ignore_reinit_error=True, log_to_driver=False,
                     include_dashboard=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises many types when it cannot start or connect
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise NormvarError(f"Ray could not start{f' at {address}' if address else ''}: {first}",
                           fix="check --ray-address (ray status), or drop --executor ray to run in one process") from None
    return ray


class _Shard:
    """One actor: the plan, the source and the accumulators' factory of the run (built once)."""

    def __init__(self, cfg_json: str, data_dir: str, threads: int):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        # the driver's intra-op thread count: matmul reductions then split the same way, so the hidden
        # states (and the run) are bit-identical to a single-process run, not merely close
        torch.set_num_threads(threads)
        from normvar_core.config import RunConfig
        from normvar_core.pipeline.sources import prepare_transformer_run

        self.plan, self.source, self.ctx = prepare_transformer_run(RunConfig.from_json(cfg_json), data_dir)

    def run(self, start: int, stop: int, counter=None) -> dict:
        from normvar_core.pipeline.execute import compute_partial

        marker = os.environ.get(CRASH_ENV)
        if marker and not Path(marker).exists():
            Path(marker).write_text(str(os.getpid()))
            os._exit(1)  # a hard crash in the middle of the run (tests)
        delay = float(os.environ.get(DELAY_ENV) or 0)

        def on_batch(i: int) -> None:
            if counter is not None:
                counter.report.remote(start, i + 1 - start)
            if delay:
                time.sleep(delay)

        part = compute_partial(self.source, self.plan, self.ctx, start, stop, on_batch=on_batch)
        return {"arrays": part.arrays(), "oom_splits": self.source.oom_splits}


class _Counter:
    """Batches finished in each running range, by its first batch (reported by the shards)."""

    def __init__(self):
        self.done: dict[int, int] = {}

    def report(self, start: int, done: int) -> None:
        self.done[int(start)] = int(done)

    def get(self) -> dict[int, int]:
        return dict(self.done)


def _in_flight(ray, counter, pending: dict) -> int:
    """Batches finished inside the ranges still running (0 if the counter does not answer)."""
    try:
        got = ray.get(counter.get.remote(), timeout=5)
    except Exception:  # noqa: BLE001 - progress is best effort
        return 0
    return sum(min(got.get(a, 0), b - a) for a, b in pending.values())


def run_sharded(cfg, data_dir: Path, plan, ctx, *, checkpoint: Path | None, fingerprint: dict,
                progress: Callable[[int, int], None] | None = None,
                should_cancel: Callable[[], bool] | None = None) -> tuple[dict, dict]:
    """Run every batch range of ``plan`` on Ray actors; returns (merged accumulators, notes).
    ``progress(batches_done, n_batches)`` is called as batches finish; ``should_cancel()`` is polled
    as often and, when true, kills the actors and raises CancelledError (finished shards stay saved)."""
    from normvar_core.errors import CancelledError
    from normvar_core.pipeline import checkpoint as ckpt
    from normvar_core.pipeline.execute import PartialState, merge_partials

    workers = int(cfg.workers or 2)
    ray = start_ray(cfg.ray_address, workers)
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    if gpus and cfg.workers is None:
        workers = int(ray.cluster_resources()["GPU"])
    ranges = shard_ranges(plan, max(1, min(plan.n_batches, 4 * workers)))
    shard_dir = Path(str(checkpoint) + ".shards") if checkpoint is not None else None
    done: dict[tuple[int, int], PartialState] = {}
    for a, b in ranges:
        if shard_dir is not None:
            got = ckpt.load(shard_dir / f"{a}-{b}.npz", fingerprint)
            if got is not None:
                done[(a, b)] = got[0]
    todo = [r for r in ranges if r not in done]
    actor_cls = ray.remote(num_gpus=gpus, num_cpus=1, max_restarts=2, max_task_retries=2)(_Shard)
    import torch

    actors = [actor_cls.remote(cfg.to_json(), str(data_dir), torch.get_num_threads())
              for _ in range(min(workers, max(len(todo), 1)))]
    counter = ray.remote(num_cpus=0)(_Counter).remote()
    pending = {}
    for i, r in enumerate(todo):
        pending[actors[i % len(actors)].run.remote(*r, counter)] = r
    oom = 0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=PROGRESS_EVERY_S)
        if should_cancel is not None and should_cancel():
            for a in [*actors, counter]:
                ray.kill(a)
            raise CancelledError("cancelled")
        if not ready:
            if progress is not None:
                progress(sum(b - a for a, b in done) + _in_flight(ray, counter, pending), plan.n_batches)
            continue
        r = pending.pop(ready[0])
        try:
            out = ray.get(ready[0])
        except Exception as exc:  # noqa: BLE001 - the actor failed beyond its retries
            raise NormvarError(f"a Ray shard (batches {r[0]}..{r[1]}) failed: {str(exc).splitlines()[0][:200]}",
                               fix="see the Ray logs; rerun resumes the finished shards") from None
        part = PartialState.from_arrays(r[0], r[1], out["arrays"])
        oom += int(out["oom_splits"])
        done[r] = part
        if shard_dir is not None:
            ckpt.save(shard_dir / f"{r[0]}-{r[1]}.npz", fingerprint, part, {})
        if progress is not None:
            progress(sum(b - a for a, b in done), plan.n_batches)
    for a in [*actors, counter]:
        ray.kill(a)
    accs = merge_partials(ctx, [done[r] for r in ranges])
    if shard_dir is not None:
        for f in shard_dir.glob("*.npz"):
            f.unlink(missing_ok=True)
        shard_dir.rmdir() if shard_dir.exists() else None
    return accs, {"executor": "ray", "shards": len(ranges), "ray_workers": len(actors), "oom_splits": oom,
                  "resumed_shards": len(ranges) - len(todo)}


__all__ = ["run_sharded", "shard_ranges", "start_ray", "CRASH_ENV", "DELAY_ENV", "PROGRESS_EVERY_S"]
