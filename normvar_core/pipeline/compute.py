"""``compute_run``: corpus + model -> one published DuckDB run file (drives the whole pipeline).

Steps: load the corpus -> load the model -> tokenize into length-sorted batches -> count n_t and
plan the PCA samples (``samples.py``) -> for each batch: ``extract`` the hidden states and
``TokenMoments.update`` (exact streaming n_t, mu(X_t), Q/M/V, eqs. 1–6, float64 on the model's
device) -> ``write_run`` (temp name, atomic publish) -> remove the checkpoint.

Checkpoints (``checkpoint=PATH``): every ``checkpoint_every_s`` seconds, and when cancelled or
interrupted between batches, one ``.npz`` (numpy arrays + a JSON string, loaded with
``allow_pickle=False``) is written to ``.<PATH name>.tmp-<pid>`` and ``os.replace``d onto PATH.
It holds the accumulator's ``state_dict``, the samples gathered so far and the next batch index.
A run resumes from it when its stored configuration equals ``cfg``; batch order is
deterministic, so the published statistics equal those of an uninterrupted run exactly.

Out of memory on a batch: the batch is split in half (recursively) and later batches are capped
at the size that fit; the number of splits is recorded in the run's ``notes``.
Nothing is published on any error; ``should_cancel()`` is polled between batches and raises
``errors.CancelledError``.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from normvar_core.config import RunConfig, default_run_name
from normvar_core.datadir import DataDir
from normvar_core.errors import CancelledError, NormvarError

CHECKPOINT_FORMAT = "normvar-checkpoint-1"


@dataclass
class Progress:
    """Passed to ``progress(p)``. ``stage`` in {corpus, model, tokenize, compute, write, done};
    ``embeddings`` counted so far (per layer), ``emb_per_s`` and ``eta_s`` for the compute stage."""

    stage: str
    sentences_done: int = 0
    sentences_total: int = 0
    embeddings: int = 0
    emb_per_s: float = 0.0
    eta_s: float | None = None


def run_path_for(cfg: RunConfig, data_dir=None, out_dir=None) -> Path:
    out = Path(out_dir) if out_dir is not None else _datadir(data_dir).runs
    return out / f"{cfg.name or default_run_name(cfg)}.duckdb"


def _datadir(data_dir) -> DataDir:
    return data_dir if isinstance(data_dir, DataDir) else DataDir.at(data_dir)


def versions() -> dict[str, str]:
    import duckdb
    import transformers

    from normvar_core import __version__

    return {"normvar": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "duckdb": duckdb.__version__, "numpy": np.__version__, "python": platform.python_version()}


# ============================================================================ checkpoints
def _save_checkpoint(path: Path, meta: dict, acc_state: dict, sample_state: dict) -> None:
    arrays = {f"acc__{k}": np.asarray(v) for k, v in acc_state.items()}
    arrays.update({f"samples__{k}": np.asarray(v) for k, v in sample_state.items()})
    arrays["meta_json"] = np.array(json.dumps(meta, sort_keys=True))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _load_checkpoint(path: Path) -> tuple[dict, dict, dict] | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta_json"]))
            acc = {k[5:]: z[k] for k in z.files if k.startswith("acc__")}
            smp = {k[9:]: z[k] for k in z.files if k.startswith("samples__")}
    except Exception as exc:  # noqa: BLE001 - a damaged checkpoint means: start over
        warnings.warn(f"ignoring unreadable checkpoint {path}: {exc}", stacklevel=3)
        return None
    if meta.get("format") != CHECKPOINT_FORMAT:
        return None
    return meta, acc, smp


# ============================================================================ the run
def compute_run(cfg: RunConfig, data_dir=None, *, overwrite: bool = False,
                progress: Callable[[Progress], Any] | None = None, checkpoint=None,
                checkpoint_every_s: float = 30.0, should_cancel: Callable[[], bool] | None = None,
                out_dir=None) -> Path:
    """Compute the run described by ``cfg`` and publish ``<out_dir or runs/>/<name>.duckdb``.

    Returns the published path. Raises NormvarError (bad input, name taken, OOM on a single
    sentence) or CancelledError; nothing is published then. ``out_dir`` overrides runs/ (CLI --out)."""
    t_start = time.monotonic()
    _limit_heap_growth()
    cfg = cfg.validate()
    dd = _datadir(data_dir)
    if cfg.name is None:
        cfg = cfg.replace(name=default_run_name(cfg))
    out_path = run_path_for(cfg, dd, out_dir)
    if out_path.exists() and not overwrite:  # before any expensive work
        raise NormvarError(f"run {cfg.name!r} already exists: {out_path}",
                           fix="choose another --name or pass --overwrite")
    report = progress or (lambda p: None)
    cancelled = should_cancel or (lambda: False)
    ckpt_path = Path(checkpoint) if checkpoint is not None else None

    from normvar_core.pipeline import batches as B
    from normvar_core.pipeline import corpus as C
    from normvar_core.pipeline import models as M
    from normvar_core.pipeline import samples as S
    from normvar_core.pipeline.moments import TokenMoments
    from normvar_core.runs.runfile import write_run

    report(Progress("corpus"))
    corpus = C.load_sentences(cfg, dd.root)
    sentences = list(corpus.sentences)
    if not sentences:
        raise NormvarError("no sentences left after filtering the corpus",
                           fix="check the corpus, --max-words, --sample-frac and --max-sentences")
    if cancelled():
        raise CancelledError("cancelled")
    report(Progress("model", sentences_total=len(sentences)))
    loaded = M.load_model(cfg, dd.root)
    info = loaded.info
    device = _device_of(loaded)
    num_hidden = int(info.num_hidden_states)
    layers = list(range(num_hidden)) if cfg.layers is None else sorted(set(int(x) for x in cfg.layers))
    bad = [x for x in layers if x >= num_hidden]
    if bad:
        raise NormvarError(f"layer(s) {bad} do not exist: the model has hidden states 0..{num_hidden - 1}",
                           fix=f"use --layers with indices below {num_hidden}")
    if cancelled():
        raise CancelledError("cancelled")

    report(Progress("tokenize", sentences_total=len(sentences)))
    max_length = cfg.max_length or info.max_length
    batch_list, n_truncated = B.make_batches(sentences, loaded.tokenizer, max_length=max_length,
                                             batch_size=cfg.batch_size,
                                             max_tokens=B.auto_max_tokens(device.type))
    excl = dict(exclude_special=cfg.exclude_special, exclude_position0=cfg.exclude_position0)
    pre_ids, pre_n = S.count_tokens(batch_list, **excl)
    total_emb = int(pre_n.sum())
    if total_emb == 0:
        raise NormvarError("no embeddings to count: every position is excluded",
                           fix="drop --exclude-special/--exclude-position0 or use longer sentences")
    tok_strings = [str(t) for t in loaded.tokenizer.convert_ids_to_tokens([int(i) for i in pre_ids])]
    tokens_of = dict(zip((int(i) for i in pre_ids), tok_strings))
    if cfg.samples_per_token > 0:
        chosen = S.choose_tokens(pre_ids, pre_n, tok_strings, seed=cfg.seed)
    else:
        chosen = np.zeros(0, np.int64)
    plan = S.plan_samples(batch_list, chosen, per_token=cfg.samples_per_token, seed=cfg.seed, **excl)
    collector = S.SampleCollector(plan, len(layers), int(info.dim))

    acc = TokenMoments(num_layers=len(layers), dim=int(info.dim), device=device, mean_dtype=cfg.mean_dtype,
                       layer_index=layers)
    acc.reserve(int(pre_ids.size))  # the type count is known: size the tables once
    sent_done_at = np.cumsum([len(b) for b in batch_list])
    state = dict(next_batch=0, seconds=0.0, oom_splits=0, max_rows=None, resumed_from=None)
    ck_meta_base = {"format": CHECKPOINT_FORMAT, "config": cfg.to_dict(), "n_batches": len(batch_list),
                    "corpus_sha256": corpus.sha256, "weights_hash": info.weights_hash,
                    "total_embeddings": total_emb, "n_samples": plan.size}
    if ckpt_path is not None and ckpt_path.exists():
        loaded_ck = _load_checkpoint(ckpt_path)
        if loaded_ck is not None:
            meta, acc_state, smp_state = loaded_ck
            if all(meta.get(k) == v for k, v in ck_meta_base.items()):
                acc = TokenMoments.from_state_dict(acc_state, device=device)
                collector.load_state_dict(smp_state)
                state.update(next_batch=int(meta["next_batch"]), seconds=float(meta["seconds"]),
                             oom_splits=int(meta["oom_splits"]), max_rows=meta.get("max_rows"),
                             resumed_from=int(meta["next_batch"]))
            else:
                warnings.warn(f"checkpoint {ckpt_path} belongs to another configuration; starting over",
                              stacklevel=2)

    def save_checkpoint() -> None:
        if ckpt_path is None:
            return
        meta = dict(ck_meta_base, next_batch=state["next_batch"], oom_splits=state["oom_splits"],
                    max_rows=state["max_rows"], seconds=state["seconds"] + (time.monotonic() - t_start))
        _save_checkpoint(ckpt_path, meta, acc.state_dict(), collector.state_dict())

    def process(bi: int, batch) -> None:
        rows = len(batch)
        cap = state["max_rows"]
        if cap is not None and rows > cap:
            for a in range(0, rows, cap):
                process(bi, batch.subset(a, min(rows, a + cap)))
            return
        try:
            states, ids = B.extract(loaded, batch, layers=layers, **excl)
        except Exception as exc:  # noqa: BLE001
            if not B.is_oom(exc):
                raise
            if rows <= 1:
                raise NormvarError("out of memory on a single sentence",
                                   fix="lower --max-length, keep fewer --layers or use --device cpu") from None
            _free_memory(device)
            state["oom_splits"] += 1
            half = (rows + 1) // 2
            state["max_rows"] = half if cap is None else min(cap, half)
            process(bi, batch.subset(0, half))
            process(bi, batch.subset(half, rows))
            return
        acc.update(states, ids)
        if plan.size:
            collector.gather(bi, batch, B.counted_mask(batch, **excl), states)

    # ---------------------------------------------------------------- main pass
    first = state["next_batch"]
    emb_at_start = acc.n_embeddings
    t_loop = time.monotonic()
    last_ck = time.monotonic()
    report(Progress("compute", int(sent_done_at[first - 1]) if first else 0, len(sentences), acc.n_embeddings,
                    0.0, None))
    clean = True  # False while a batch is half-applied: never checkpoint then
    try:
        for bi in range(first, len(batch_list)):
            if cancelled():
                raise CancelledError("cancelled")
            clean = False
            process(bi, batch_list[bi])
            clean = True
            state["next_batch"] = bi + 1
            now = time.monotonic()
            rate = (acc.n_embeddings - emb_at_start) / max(now - t_loop, 1e-9)
            eta = (total_emb - acc.n_embeddings) / rate if rate > 0 else None
            report(Progress("compute", int(sent_done_at[bi]), len(sentences), acc.n_embeddings, rate, eta))
            if ckpt_path is not None and now - last_ck >= checkpoint_every_s and bi + 1 < len(batch_list):
                save_checkpoint()
                last_ck = time.monotonic()
    except BaseException:
        if clean and ckpt_path is not None and state["next_batch"] > (state["resumed_from"] or 0):
            try:
                save_checkpoint()
            except Exception:  # noqa: BLE001 - the original error matters more
                pass
        raise

    # ---------------------------------------------------------------- publish
    report(Progress("write", len(sentences), len(sentences), acc.n_embeddings, 0.0, 0.0))
    n_embeddings = int(acc.n_embeddings)
    stats = acc.result()
    acc = None  # drop the accumulator's tables before writing (the result is a copy)
    S.check_counts(pre_ids, pre_n, stats)
    tokens = [tokens_of[int(t)] for t in stats.token_ids]
    seconds = state["seconds"] + (time.monotonic() - t_start)
    meta = {
        "model": cfg.model, "revision": cfg.revision, "weights_hash": info.weights_hash,
        "architecture": info.architecture, "norm_placement": info.norm_placement,
        "norm_type": info.norm_type, "final_norm": bool(info.final_norm),
        "num_layers": num_hidden - 1, "dim": int(info.dim), "layers": layers,
        "corpus_name": corpus.name, "corpus_sha256": corpus.sha256, "options": cfg.to_dict(),
        "n_sentences": len(sentences), "n_truncated": int(n_truncated), "n_embeddings": n_embeddings,
        "n_types": stats.num_types, "device": str(device), "dtype": cfg.dtype, "seconds": seconds,
        "versions": versions(), "created_at": _dt.datetime.now(_dt.timezone.utc),
        "notes": {"n_batches": len(batch_list), "batch_size": cfg.batch_size or max(len(b) for b in batch_list),
                  "oom_splits": state["oom_splits"], "max_rows_after_oom": state["max_rows"],
                  "resumed_from_batch": state["resumed_from"], "n_samples": plan.size,
                  "n_sampled_types": int(np.unique(plan.token_ids).size), "is_decoder": bool(info.is_decoder), "max_length": max_length,
                  "corpus": _corpus_notes(corpus)},
    }
    path = write_run(out_path, meta=meta, stats=stats, tokens=tokens,
                     sentence_lengths=np.asarray(corpus.sentence_lengths),
                     samples=collector.result(tokens_of) if plan.size else None, overwrite=overwrite)
    if ckpt_path is not None:
        ckpt_path.unlink(missing_ok=True)
    report(Progress("done", len(sentences), len(sentences), n_embeddings, 0.0, 0.0))
    return path


_MALLOPT_DONE = False


def _limit_heap_growth() -> None:
    """glibc raises its mmap threshold dynamically up to 32 MB once a large block is freed, after
    which every batch's activations (all shapes differ) come from the heap and fragment it: peak
    RSS then grows with the number of batches. A fixed 128 KiB threshold (mallopt
    M_MMAP_THRESHOLD, as MALLOC_MMAP_THRESHOLD_=131072 would) returns them to the OS on free."""
    global _MALLOPT_DONE
    if _MALLOPT_DONE or not sys.platform.startswith("linux") or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    _MALLOPT_DONE = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to do
        pass


def _corpus_notes(corpus) -> dict:
    out = {}
    for k in ("path", "format", "text_column", "n_read", "n_kept", "n_too_long", "n_empty", "n_sampled_out",
              "n_capped"):
        v = getattr(corpus, k, None)
        if v is not None:
            out[k] = str(v) if isinstance(v, Path) else v
    return out


def _device_of(loaded) -> torch.device:
    dev = getattr(loaded, "device", None)
    if dev is not None:
        return torch.device(dev)
    try:
        return next(loaded.model.parameters()).device
    except StopIteration:  # pragma: no cover
        return torch.device("cpu")


def _free_memory(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps" and hasattr(torch, "mps"):
        torch.mps.empty_cache()


# ============================================================================ CLI progress
class TqdmProgress:
    """A ``progress`` callback drawing a tqdm bar on stderr: sentences, embeddings/s, ETA."""

    def __init__(self, file=None, disable: bool | None = None):
        self.file = file or sys.stderr
        self.disable = disable
        self.bar = None
        self.stage = None

    def __call__(self, p: Progress) -> None:
        from tqdm import tqdm

        if p.stage != self.stage:
            self.stage = p.stage
            if p.stage == "compute" and self.bar is None:
                self.bar = tqdm(total=p.sentences_total, initial=p.sentences_done, unit="sent", file=self.file,
                                disable=self.disable, desc="normvar", dynamic_ncols=True, mininterval=0.5)
            elif p.stage in ("write", "done") and self.bar is not None:
                self.bar.n = p.sentences_done
                self.bar.refresh()
                self.bar.close()
                self.bar = None
            return
        if self.bar is not None and p.stage == "compute":
            self.bar.update(max(0, p.sentences_done - self.bar.n))
            self.bar.set_postfix_str(f"{p.embeddings:,} emb, {p.emb_per_s:,.0f} emb/s", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


__all__ = ["compute_run", "Progress", "default_run_name", "run_path_for", "TqdmProgress",
           "versions"]
