"""The Ray executor's model-holding actor (``on_ray.RayPool`` starts them): ``Shard`` holds the model, the
run's plan and one running partial state of the batch ranges it ran (the batch counter the shards report to is
``progress.BatchCounter``). The test hooks (crash, delay) are read here, from the environment."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from normvar_core.config import RunConfig
from normvar_core.pipeline import models
from normvar_core.pipeline.contracts import RunContext
from normvar_core.pipeline.corpus.shares import encoded_arrays, unpack_strings
from normvar_core.pipeline.encoding import encode_sentences
from normvar_core.pipeline.execute import heap
from normvar_core.pipeline.execute.blas_threads import hold_one_blas_thread
from normvar_core.pipeline.execute.checkpoint import partial_state
from normvar_core.pipeline.execute.partials import build_measures, run_range
from normvar_core.pipeline.execute.plan_payload import plan_from_payload
from normvar_core.pipeline.execute.ray_corpus import RangeState, actor_keep
from normvar_core.pipeline.measures import prime
from normvar_core.pipeline.memory.per_device import device_limits, plan_placed
from normvar_core.pipeline.memory.terms import loaded_budget
from normvar_core.pipeline.model_shape import shape_of_loaded
from normvar_core.pipeline.models.norm_params import norm_tables
from normvar_core.pipeline.sources import TransformerSource, kept_places, state_device


class Decisions:
    """An actor's ``ctx.memory``: the driver's drops (``RunContext.dropped`` reads ``.reasons``), so every
    actor holds exactly the measures the driver merges."""

    def __init__(self, reasons: dict):
        self.reasons = dict(reasons)


CRASH_ENV = "NORMVAR_TEST_CRASH_ONCE"  # tests: marker file; the first actor to see it absent while it holds
#                                        an unflushed range dies in the middle of its next range
PIECE_CRASH_ENV = "NORMVAR_TEST_CRASH_IN_PIECE"  # tests: marker file; the first actor asked for a block while it
#                                                is absent dies there
DELAY_ENV = "NORMVAR_TEST_BATCH_DELAY_S"  # tests: seconds each shard sleeps after reporting a batch


class Shard:
    """One actor: the model (loaded once), the run's plan (from the driver's payload, built once) and
    one running partial state of every range it ran since its last ``flush``."""

    def __init__(self, cfg_json: str, data_dir: str, threads: int):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before the model loads (huggingface_hub reads it once)
        import ray  # an optional extra (requirements-ray.txt): imported where an actor runs

        # the driver's intra-op thread count: matmul reductions split the same way, so the run is bit-identical
        torch.set_num_threads(threads)
        heap.reuse_heap()  # this actor's batches reuse heap pages, as a local run's
        hold_one_blas_thread()  # and numpy's BLAS at one thread, as a local run's (``blas_threads``)
        self.cfg = RunConfig.from_json(cfg_json)
        self.loaded = models.load_model(self.cfg, data_dir)
        self.node = ray.get_runtime_context().get_node_id()
        self.plan: Any
        self.source: TransformerSource
        self.ctx: RunContext
        self.accs: dict[str, Any]
        self.corpus_state: RangeState | None
        self.plan = self.source = self.ctx = self.accs = self.corpus_state = None  # type: ignore[assignment]  # set by the driver's calls before use
        self.covered: list[tuple[int, int]] = []
        self.oom_reported = 0
        self.outgoing: tuple[str, dict] | None = None  # (token, {key: array}) of the last flush, until released

    def tokenize(self, share: dict, max_length: int, unit: str) -> dict:
        """The encoding of one share of kept sentences (``corpus_shares``: CSV) and its CPU seconds."""
        t0 = time.process_time()
        enc = encode_sentences(unpack_strings(share), self.loaded.tokenizer, max_length=max_length, unit=unit)
        return dict(encoded_arrays(enc), cpu_s=np.float64(time.process_time() - t0))

    def parse(self, meta: dict, data: bytes, column: str | None) -> dict:
        """Corpus phase 1 (``ray_corpus.RangeState``): parse this byte range; its records stay here."""
        self.corpus_state = self.corpus_state or RangeState(self.cfg)
        return self.corpus_state.parse(dict(meta, data=data), column)

    def select(self, meta: dict, data: bytes, column: str | None, skip: int) -> int:
        """Corpus phase 2: sample with the generator advanced past ``skip`` uniforms; how many picked."""
        if self.corpus_state is None:  # a restarted actor: phase 1 again
            self.parse(meta, data, column)
        return len(self.corpus_state.selection(dict(meta, data=data), column, skip).kept)  # type: ignore[union-attr]  # parse() above set it

    def keep(self, meta: dict, data: bytes, column: str | None, skip: int, room: int) -> dict:
        """Corpus phase 3: keep ``room`` picked sentences, tokenize them (``ray_corpus.actor_keep``)."""
        self.select(meta, data, column, skip)
        state, self.corpus_state = self.corpus_state, None
        sel = state.selection(dict(meta, data=data), column, skip)  # type: ignore[union-attr]  # select() above set it
        max_length = int(self.cfg.max_length or self.loaded.info.max_length)
        return actor_keep(self.cfg, sel, room, self.loaded.tokenizer, max_length, prior_cpu_s=state.cpu_s)  # type: ignore[union-attr]

    def describe(self) -> dict:
        """The model this actor loaded, for the driver (which loads no weights): its ``ModelInfo`` and
        ``ModelShape``."""
        return {"info": self.loaded.info.to_dict(), "shape": dataclasses.asdict(shape_of_loaded(self.loaded))}

    def tables(self, layers: list[int]) -> dict:
        """The run's App. I tables of ``layers`` (``norm_tables``, from the weights) and the memory figure a local
        run plans against (``loaded_budget``: free memory plus what this process holds, measured here)."""
        info = self.loaded.info
        return {
            "tables": norm_tables(
                self.loaded.model, self.loaded.tokenizer, list(layers), int(info.dim), where=self.loaded.norm_outputs
            ),
            "measured": int(loaded_budget(self.loaded.device.type)),
        }

    def devices(self, payload_box: list) -> dict:
        """--device-map: the per-device memory plan of this actor's placed replica
        (``memory.per_device.plan_placed``) for the driver's plan and memory decisions (``payload_box``: [plan
        arrays, decisions])."""
        import ray

        _, ctx = self._context(ray.get(payload_box[0]), payload_box[1])
        dmap: dict[str, str] = self.loaded.info.device_map  # type: ignore[assignment]  # a --device-map actor's map
        return plan_placed(
            ctx,
            shape_of_loaded(self.loaded),
            self.loaded.model,
            dmap,
            device_limits(dmap),
            dtype=str(self.loaded.info.dtype),  # "auto" resolved as loaded
        )

    def early(self, payload_box: list) -> dict:
        """The measures' early pass results ({name: result}, ``measures.prime``): computed in one actor, sent by
        the driver to every actor with the plan, so all start from the same (the occurrences' axes); {} when the
        run keeps no measure with an early pass."""
        self._ensure_plan(payload_box[:2])
        return self.ctx.early

    def _context(self, arrays: dict, reasons_json: str):
        """(plan, context) of the driver's plan arrays and memory decisions (JSON {measure: reason})."""
        plan = plan_from_payload(self.cfg, arrays)
        info, places = self.loaded.info, kept_places(self.loaded.info, plan.layers)
        return plan, RunContext(
            cfg=self.cfg,
            layers=plan.layers,
            dim=int(info.dim),
            plan=plan,
            tokens=plan.tokens,
            device=state_device(places, info.device),
            places=places,
            memory=Decisions(json.loads(reasons_json)),
        )

    def _ensure_plan(self, payload_box: list) -> None:
        """The plan, source and context, built once from ``payload_box`` = [plan arrays, memory decisions, early
        pass results]; without the results (``early``) this actor runs the early passes."""
        if self.plan is not None:
            return
        import ray

        self.plan, self.ctx = self._context(ray.get(payload_box[0]), payload_box[1])
        self.source = TransformerSource(self.loaded, self.plan.layers)
        early = payload_box[2] if len(payload_box) > 2 else None
        if early is not None:
            self.ctx.early = dict(ray.get(early))
        else:
            prime(self.ctx, self.source, reuse=False)

    def run(self, payload_box: list, start: int, stop: int, counter=None) -> list[int]:
        """Add batches [start, stop) to this actor's running partial state."""
        self._ensure_plan(payload_box)
        marker = os.environ.get(CRASH_ENV)
        delay = float(os.environ.get(DELAY_ENV) or 0)
        crash = bool(marker) and bool(self.covered) and not Path(marker).exists()  # type: ignore[arg-type]  # bool(marker) first
        if self.accs is None:
            self.accs = build_measures(self.ctx)

        def on_batch(i: int) -> None:
            heap.trim_if_grown()
            if counter is not None:
                counter.report.remote(start, i + 1 - start)
            if crash:  # a hard crash in the middle of a range, with another range held unflushed (tests)
                Path(marker).write_text(str(os.getpid()))  # type: ignore[arg-type]  # crash implies marker
                os._exit(1)
            if delay:
                time.sleep(delay)

        run_range(self.source, self.plan, self.accs, start, stop, on_batch=on_batch)
        self.covered.append((int(start), int(stop)))
        return [int(start), int(stop)]

    def flush(self) -> dict:
        """The ranges of the running partial state and its small arrays; its arrays of 3+ dimensions
        (per-type means, scatters, samples) stay here as ``outgoing``, for the driver to fetch one layer
        block at a time (``piece``) under the returned ``token``. Then a fresh state."""
        out = {
            "covered": np.asarray(self.covered, np.int64).reshape(-1, 2),
            "small": {},
            "blocks": {},
            "token": "",
            "node": self.node,
            "oom_splits": 0,
        }
        if self.accs is not None:
            arrays = partial_state(self.accs, 0, 0).arrays()
            big = {k: v for k, v in arrays.items() if v.ndim >= 3}
            out["small"] = {k: v for k, v in arrays.items() if k not in big}
            out["blocks"] = {k: int(v.shape[0]) for k, v in big.items()}
            out["token"] = os.urandom(8).hex()
            self.outgoing = (out["token"], big)  # type: ignore[assignment]  # the token is a str
            out["oom_splits"] = self.source.oom_splits - self.oom_reported
            self.oom_reported = self.source.oom_splits
        self.accs, self.covered = None, []  # type: ignore[assignment]  # until the next run
        return out

    def piece(self, token: str, key: str, block: int) -> np.ndarray:
        """Layer block ``block`` of the outgoing array ``key`` (runs beside ``run``: its own thread)."""
        marker = os.environ.get(PIECE_CRASH_ENV)
        if marker and not Path(marker).exists():  # tests: die while the driver is half-way through a merge
            Path(marker).write_text(str(os.getpid()))
            os._exit(1)
        held = self.outgoing
        if held is None or held[0] != token:  # a restarted actor: the state the driver asks for is gone
            raise LookupError(f"flush {token} is not held here")
        return np.ascontiguousarray(held[1][key][block])

    def release(self, token: str) -> None:
        if self.outgoing is not None and self.outgoing[0] == token:
            self.outgoing = None


__all__ = ["Shard", "Decisions", "CRASH_ENV", "PIECE_CRASH_ENV", "DELAY_ENV"]
