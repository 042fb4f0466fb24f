"""The checks a run's inputs pass before any model loads, one function that ``compute`` (``prepare.run_target``),
``plan`` (``dry_run.plan_run``) and ``submit`` (``JobStore.submit``) all call, so none of them accepts what
another refuses: the ``--dataset`` (an unknown dataset, split or column; an empty one; a folder that is not one),
else the ``--corpus`` file (found, a regular file: never a FIFO that would block the read), the device-map options
(read in ``RunConfig.validate``), the ``--offload-folder`` (made and written to), and the devices the map names
(present on this machine; not for a plan made for other devices, ``plan --devices``) and the modules a map file
names (the model's own, on the meta device from its config: no weights read).
"""
from __future__ import annotations

from normvar_core.device_options import read_device_map
from normvar_core.pipeline.corpus.dataset import check_dataset
from normvar_core.pipeline.corpus.formats import resolve_corpus_path
from normvar_core.pipeline.models.device_map import (check_devices_present, check_map_modules, check_offload_folder,
                                                       meta_model)
from normvar_core.pipeline.model_shape import config_and_tokenizer


def check_inputs(cfg, data_dir=None, *, devices_here: bool = True) -> None:
    """Raise one NormvarError line for the first input of ``cfg`` (validated) that a run would refuse."""
    if cfg.dataset:
        check_dataset(cfg)
    else:
        resolve_corpus_path(cfg.corpus, data_dir)
    check_offload_folder(cfg.offload_folder)
    if devices_here:
        check_devices_present(cfg)
    dmap = read_device_map(cfg.device_map)
    # its module names are the model's: read from its config, on the meta device; a Ray run's driver builds no
    # model at all (each actor checks the map as it loads, ``memory.per_device.placed_map``)
    if isinstance(dmap, dict) and cfg.executor != "ray":
        _, config, _ = config_and_tokenizer(cfg, data_dir)
        check_map_modules(dmap, meta_model(config, trust_remote_code=bool(cfg.trust_remote_code)), str(cfg.device_map))


__all__ = ["check_inputs"]
