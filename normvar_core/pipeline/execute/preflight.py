"""The checks a run's inputs pass before any model loads, one function that ``compute`` (``run_target``),
``plan`` (``dry_run.plan_run``) and ``submit`` (``JobStore.submit``) all call, so none of them accepts what
another refuses: the ``--dataset`` (an unknown dataset, split or column; an empty one; a folder that is not one),
else the ``--corpus`` file (found, a regular file: never a FIFO that would block the read), the device-map options
(read in ``RunConfig.validate``), the ``--offload-folder`` (made and written to), and the devices the map names
(present on this machine; not for a plan made for other devices, ``plan --devices``) and the modules a map file
names (the model's own, on the meta device from its config: no weights read); and a ``--sample-frac`` that keeps
no sentence of the corpus file (``check_sample_frac``).

``check_model`` adds, for ``submit``, the model checks ``compute`` makes once it has read the model's config (a
local directory holding config.json, ``--layers`` within its hidden states, ``--max-length`` within its limit),
from the config and tokenizer only (no weights); a hub id is left to the worker, which may fetch it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from normvar_core.config import RunConfig, default_run_name, run_path_for
from normvar_core.datadir import DataDir
from normvar_core.destination import check_destination, resolve_destination
from normvar_core.device_options import read_device_map
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.dataset import check_dataset
from normvar_core.pipeline.corpus.formats import resolve_corpus_path
from normvar_core.pipeline.execute.ray_cluster import preflight as ray_preflight
from normvar_core.pipeline.model_shape import config_and_tokenizer
from normvar_core.pipeline.models.device_map import (
    check_devices_present,
    check_map_modules,
    check_offload_folder,
    meta_model,
)


@dataclass(frozen=True)
class RunTarget:
    """Where a run goes: its validated, named configuration, data dir, run file and checkpoint."""

    cfg: RunConfig
    data_dir: DataDir
    out_path: Path
    checkpoint: Path | None
    overwrite: bool
    fresh: bool = False
    locked: tuple[Path, ...] = ()  # what the compute locks (``run_lock.computing_all``): output, name, checkpoint


def run_target(
    cfg: RunConfig, data_dir=None, *, out_dir=None, overwrite: bool = False, checkpoint=None, fresh: bool = False
) -> RunTarget:
    """The checks that need no model: ``cfg`` valid, its inputs (``check_inputs``), Ray reachable for
    ``--executor ray`` (``ray_cluster.preflight``), ``cfg`` named, its run file free (or ``overwrite``), the
    checkpoint a regular file or a free name (never a link: ``destination.resolve_destination``) in a writable
    folder. ``out_dir`` overrides runs/ (CLI --out). The target locks its run file, the run name's file in the
    data directory and the checkpoint (``locked``)."""
    cfg = cfg.validate()
    check_inputs(cfg, data_dir)  # dataset or corpus, offload folder, mapped devices: before any model loads
    if cfg.executor == "ray":  # Ray installed, its address answering, --workers within the cores
        ray_preflight(cfg)
    dd = DataDir.at(data_dir)
    if cfg.name is None:
        cfg = cfg.replace(name=default_run_name(cfg))
    out_path = run_path_for(cfg, dd, out_dir)
    check_destination(out_path, overwrite)
    saved = resolve_destination(checkpoint, what="--checkpoint", make_parents=True) if checkpoint is not None else None
    locked = tuple(dict.fromkeys(p for p in (out_path, dd.run_path(cfg.name), saved) if p is not None))  # type: ignore[arg-type]  # a compute names its run
    return RunTarget(cfg, dd, out_path, saved, overwrite, fresh, locked)


def check_inputs(cfg, data_dir=None, *, devices_here: bool = True) -> None:
    """Raise one NormvarError line for the first input of ``cfg`` (validated) that a run would refuse."""
    if cfg.dataset:
        check_dataset(cfg)
    else:
        check_sample_frac(cfg, resolve_corpus_path(cfg.corpus, data_dir))
    check_offload_folder(cfg.offload_folder)
    if devices_here:
        check_devices_present(cfg)
    dmap = read_device_map(cfg.device_map)
    # its module names are the model's: read from its config, on the meta device; a Ray run's driver builds no
    # model at all (each actor checks the map as it loads, ``memory.per_device.placed_map``)
    if isinstance(dmap, dict) and cfg.executor != "ray":
        _, config, _ = config_and_tokenizer(cfg, data_dir)
        check_map_modules(dmap, meta_model(config, trust_remote_code=bool(cfg.trust_remote_code)), str(cfg.device_map))


# the most bytes of text one byte of a gzip member expands to (DEFLATE's limit: 258 bytes per 2 bits, about 1032:1)
GZIP_MAX_RATIO = 1032
# below this chance of keeping even one sentence, a --sample-frac is refused
LEAST_CHANCE = 1e-3


def record_bound(path: Path, split: bool) -> int | None:
    """At most how many records (sentences) ``path`` holds: one per byte of text (a record is at least one
    character), the text of a .txt.gz being at most ``GZIP_MAX_RATIO`` times its size; a Parquet file's rows
    (None when its cells are split into sentences, or it cannot be read: no bound)."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            return None if split else int(pq.ParquetFile(path).metadata.num_rows)
        except Exception:
            return None
    return path.stat().st_size * (GZIP_MAX_RATIO if name.endswith(".gz") else 1)


def check_sample_frac(cfg, path: Path) -> None:
    """Refuse a ``--sample-frac`` that keeps no sentence of ``path``: a record is kept when its uniform
    ``k / 2^53`` (numpy's ``random()``) is below the fraction, so with probability ``p = ceil(f 2^53) / 2^53``,
    and the chance that any of at most ``N = record_bound(path)`` records is kept is at most ``N p``."""
    frac = float(cfg.sample_frac)
    if frac >= 1.0:
        return
    p = math.ceil(frac * 2.0**53) / 2.0**53
    bound = record_bound(path, bool(cfg.split_sentences))
    if bound is not None and bound * p < LEAST_CHANCE:
        name = path.name.lower()
        if name.endswith(".parquet"):
            held = f"its {bound:,} rows"
        elif name.endswith(".gz"):
            held = f"its {path.stat().st_size:,} compressed bytes: at most {bound:,} records of text"
        else:
            held = (
                f"its {path.stat().st_size:,} bytes: at most {bound:,} records, a record being one character at least"
            )
        raise NormvarError(
            f"--sample-frac {frac:g} keeps no sentence of {path.name} ({held}; each kept with probability {p:.3g})",
            fix="raise --sample-frac (1 keeps every sentence), or use --max-sentences to cap the run",
        )


def _is_hub_id(name: str) -> bool:
    """A model name that is neither an alias nor a local path (as ``models.resolve.resolve_source`` reads it)."""
    from normvar_core.pipeline.models import aliases

    name = name.strip()
    return (
        name not in aliases.ALIASES
        and not Path(name).expanduser().exists()
        and not name.startswith((".", "/", "~"))
        and name.count("/") <= 1
    )


def _needs_assembly(cfg, data_dir) -> bool:
    """An alias whose GGUF file is assembled from its parts on first use (minutes): left to the worker."""
    from normvar_core.datadir import DataDir
    from normvar_core.pipeline.models import aliases
    from normvar_core.pipeline.models.resolve import resolve_source

    if cfg.model.strip() not in aliases.ALIASES:
        return False
    cache = DataDir.at(data_dir).cache / "models"
    src = resolve_source(cfg, cache)
    return src.prepare is not None and not (cache / str(src.cache_key) / "config.json").exists()


@functools.lru_cache(maxsize=32)
def _depth_and_limit(model: str, gguf_file, revision, trust_remote_code: bool, data_dir: str) -> tuple[int, int]:
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.model_shape import shape_from_config

    cfg = RunConfig(model=model, gguf_file=gguf_file, revision=revision, trust_remote_code=trust_remote_code)
    name, config, tok = config_and_tokenizer(cfg, data_dir or None)
    shape = shape_from_config(config, name, trust_remote_code=trust_remote_code, tokenizer=tok)
    return shape.num_hidden_states, shape.max_length


def check_model(cfg, data_dir=None) -> None:
    """The model checks of ``compute`` that need its config (module docstring); a hub id is not checked."""
    from normvar_core.pipeline.run_plan import check_max_length, kept_layers

    if _is_hub_id(cfg.model) or _needs_assembly(cfg, data_dir):
        return
    depth, limit = _depth_and_limit(
        cfg.model, cfg.gguf_file, cfg.revision, bool(cfg.trust_remote_code), str(data_dir or "")
    )
    kept_layers(cfg, depth)
    check_max_length(cfg, limit)


__all__ = ["RunTarget", "run_target", "check_inputs", "check_model", "check_sample_frac"]
