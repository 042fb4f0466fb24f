"""Stage 2 — state sources: where hidden states come from.

* ``TransformerSource``: a Hugging Face model (``models.load_model``); one forward pass per plan
  batch with ``output_hidden_states``; it publishes App. I's ``norm_params`` and ``norm_affine``
  tables (``models.norm_params``, from the load's probe); padding dropped through the attention
  mask (either side); special tokens / position 0 dropped when the run asks (``batches.counted_mask``). Out of memory
  on a batch: the batch is split in half (recursively) and later batches are capped at the size
  that fit (``oom_splits``/``max_rows`` go to the run's notes).
* ``GaussianSource``: seeded synthetic states x = s_l (mu_t + sigma z) with mu_t a fixed random
  vector per token id and z ~ N(0, I) drawn per batch from ``Generator([seed, batch index])`` —
  the same states whatever the batch range or process, so it exercises the pipeline (merge,
  shards, checkpoints) against a float64 brute force without a model.

Both yield ``contracts.StateBatch`` for plan batches [start, stop).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from normvar_core.errors import NormvarError
from normvar_core.pipeline import batches
from normvar_core.pipeline.contracts import SourceInfo, StateBatch, StateSource
from normvar_core.pipeline.models.norm_params import norm_tables

REUSE_BYTES = 512 * 2**20  # states of batches computed before the pass kept for it (``TransformerSource.reuse``)


def positions_of(batch, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sentence_ids, positions) of the True entries of ``mask`` (B, W) in row-major order — the
    order of ``hidden_state[mask]``. Positions count from each row's first real token."""
    rows, cols = torch.nonzero(mask.cpu(), as_tuple=True)
    sent = torch.as_tensor(np.asarray(batch.indices, np.int64))[rows]
    pos = cols - batches.first_position(batch)[rows]
    return sent, pos.to(torch.int64)


class TransformerSource(StateSource):
    """Hidden states of a transformer (see the module docstring)."""

    def __init__(self, loaded, layers: list[int]):
        self.loaded = loaded
        self.layers = list(layers)
        info = loaded.info
        self.info = source_info(
            info,
            norm_tables(
                loaded.model, loaded.tokenizer, self.layers, int(info.dim), where=getattr(loaded, "norm_outputs", None)
            ),
        )
        self.places = kept_places(info, self.layers)
        entries = list(dict.fromkeys(e for e, _ in self.places or ()))
        self.groups = (
            None
            if len(entries) < 2
            else [
                (
                    [j for j, (e, _) in enumerate(self.places) if e == entry],  # type: ignore[arg-type]  # two entries or more: places is set
                    next(d for e, d in self.places if e == entry),  # type: ignore[union-attr]
                )
                for entry in entries
            ]
        )
        self.oom_splits = 0
        self.completed_batch: int | None = None
        self.max_rows: int | None = None
        self.kept: dict[int, list[StateBatch]] = {}  # batches computed before the pass (``reuse``)

    def reuse(self, batches: dict[int, list[StateBatch]]) -> None:
        """Keep batches already computed (an early pass's: ``Measure.early_pass``) to yield them again when the pass
        reaches them instead of a second forward pass: on the CPU and up to ``REUSE_BYTES`` of states only
        (on a GPU the forward pass is cheap next to holding its states)."""
        nbytes = sum(
            t.numel() * t.element_size()
            for sbs in batches.values()
            for sb in sbs
            for t in ((sb.states,) if sb.groups is None else sb.groups)
        )
        if self.device.type == "cpu" and nbytes <= REUSE_BYTES:
            self.kept = dict(batches)

    @property
    def device(self) -> torch.device:
        return self.loaded.device

    @property
    def state_device(self) -> torch.device:
        return state_device(self.places, self.device)

    @property
    def tokenizer(self):
        return self.loaded.tokenizer

    def batches(self, plan, start: int, stop: int) -> Iterator[StateBatch]:
        """One forward pass per plan batch; the next batch is built (padded from the flat encoding,
        and pinned for a CUDA device) in a background thread while the model runs on this one."""
        if start >= stop:
            return
        pin = self.device.type == "cuda"
        self.completed_batch = None

        def prepare(bi: int):
            batch = plan.batches[bi]
            if pin:
                batch.input_ids, batch.attention_mask = batch.input_ids.pin_memory(), batch.attention_mask.pin_memory()
            return batch

        for bi in [b for b in self.kept if b < start]:  # resumed past them
            del self.kept[bi]
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="normvar-batches") as pool:
            ahead = pool.submit(prepare, start)
            for bi in range(start, stop):
                batch = ahead.result()
                if bi + 1 < stop:
                    ahead = pool.submit(prepare, bi + 1)
                kept = self.kept.pop(bi, None)
                yield from (kept if kept is not None else self._forward(bi, batch, plan.exclusions))
                self.completed_batch = bi  # every piece of batch bi was taken (runs before the next forward)

    def _forward(self, bi: int, batch, excl: dict, last: bool = True) -> Iterator[StateBatch]:
        """The pieces of batch ``bi`` (one, or more after an OOM split); ``last``: this part ends the batch."""
        rows = len(batch)
        cap = self.max_rows
        if cap is not None and rows > cap:
            for a in range(0, rows, cap):
                yield from self._forward(bi, batch.subset(a, min(rows, a + cap)), excl, last and a + cap >= rows)
            return
        try:
            states, ids = batches.extract(self.loaded, batch, layers=self.layers, groups=self.groups, **excl)
        except Exception as exc:
            if not batches.is_oom(exc):
                raise
            if rows <= 1:
                raise NormvarError(
                    "out of memory on a single sentence",
                    fix="lower --max-length, keep fewer --layers or use --device cpu",
                ) from None
            _free_memory(self.device)
            self.oom_splits += 1
            half = (rows + 1) // 2
            self.max_rows = half if cap is None else min(cap, half)
            yield from self._forward(bi, batch.subset(0, half), excl, False)
            yield from self._forward(bi, batch.subset(half, rows), excl, last)
            return
        sent, pos = positions_of(batch, batches.counted_mask(batch, **excl))
        grouped = isinstance(states, tuple)
        yield StateBatch(
            index=bi,
            states=None if grouped else states,
            token_ids=ids,
            sentence_ids=sent,
            positions=pos,
            groups=states if grouped else None,
            last=last,
        )

    def notes(self) -> dict:
        return {"oom_splits": self.oom_splits, "max_rows_after_oom": self.max_rows}


class GaussianSource(StateSource):
    """Seeded Gaussian states for the plan's token ids (see the module docstring).

    ``scales`` (L,): per-layer factor s_l; ``offset``: norm of the per-type means mu_t;
    ``sigma``: spread around them. ``mean_of(token_id)`` is the exact mu_t (for brute-force tests)."""

    def __init__(
        self,
        *,
        dim: int,
        layers: list[int],
        seed: int = 0,
        offset: float = 1.0,
        sigma: float = 1.0,
        scales=None,
        num_hidden_states: int | None = None,
        dtype=torch.float32,
    ):
        self.dim = int(dim)
        self.layers = list(layers)
        self.seed = int(seed)
        self.offset = float(offset)
        self.sigma = float(sigma)
        self.scales = np.ones(len(self.layers)) if scales is None else np.asarray(scales, np.float64)
        self.dtype = dtype
        self.info = SourceInfo(
            dim=self.dim,
            num_hidden_states=int(num_hidden_states or max(self.layers) + 1),
            device="cpu",
            meta={
                "model": f"gaussian:{self.seed}",
                "architecture": "Gaussian",
                "norm_placement": "none",
                "norm_type": "none",
                "final_norm": False,
                "weights_hash": f"gaussian-{self.seed}",
            },
        )

    def mean_of(self, token_id: int) -> np.ndarray:
        v = np.random.default_rng([self.seed, 1, int(token_id)]).standard_normal(self.dim)
        return self.offset * v / np.linalg.norm(v)

    def batches(self, plan, start: int, stop: int) -> Iterator[StateBatch]:
        for bi in range(start, stop):
            batch = plan.batches[bi]
            mask = batches.counted_mask(batch, **plan.exclusions)
            ids = batches.unit_ids(batch)[mask]
            uniq, inv = np.unique(ids.numpy(), return_inverse=True)
            mu = np.stack([self.mean_of(t) for t in uniq]) if uniq.size else np.zeros((0, self.dim))
            z = np.random.default_rng([self.seed, 0, bi]).standard_normal((ids.numel(), self.dim))
            base = mu[inv] + self.sigma * z
            X = np.stack([s * base for s in self.scales])
            sent, pos = positions_of(batch, mask)
            yield StateBatch(
                index=bi, states=torch.from_numpy(X).to(self.dtype), token_ids=ids, sentence_ids=sent, positions=pos
            )

    def notes(self) -> dict:
        return {}


def source_info(info, tables: dict) -> SourceInfo:
    """A transformer source's ``SourceInfo`` from its ``ModelInfo`` and its App. I tables (``norm_tables``)."""
    return SourceInfo(
        dim=int(info.dim),
        num_hidden_states=int(info.num_hidden_states),
        device=str(torch.device(info.device)),
        meta=_model_meta(info),
        tables=tables,
    )


def kept_places(info, layers: list[int]) -> list | None:
    """--device-map: (map entry, state device) of each kept layer (``ModelInfo.places``); None without a map."""
    places = info.places
    return [tuple(places[i]) for i in layers] if places else None


def state_device(places: list | None, device) -> torch.device:
    """Where the measures' state lives: the model's device, or the one device of a device map's kept layers."""
    devices = {d for _, d in places or ()}
    return torch.device(devices.pop()) if len(devices) == 1 else torch.device(device)


def _model_meta(info) -> dict:
    return {
        "model": info.name,
        "revision": info.revision,
        "weights_hash": info.weights_hash,
        "architecture": info.architecture,
        "norm_placement": info.norm_placement,
        "norm_type": info.norm_type,
        "final_norm": bool(info.final_norm),
        "num_layers": int(info.num_hidden_states) - 1,
        "dim": int(info.dim),
        "dtype": info.dtype,
        "is_decoder": bool(info.is_decoder),
        "stack": info.stack,
        "device_map": info.device_map or {},
    }


def _free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps" and hasattr(torch, "mps"):
        torch.mps.empty_cache()


__all__ = ["TransformerSource", "GaussianSource", "positions_of", "source_info", "kept_places", "state_device"]
