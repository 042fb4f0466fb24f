"""The Ray executor's corpus: byte ranges of the file to the actors, the run's sentences and encoding back.

What travels where (``corpus.ranges`` has the rule of each step):

1. The driver streams the file once (sha256, gzip checks, .gz decompressed) and cuts its bytes into
   one range per actor at record boundaries (``ranges.cut_ranges``; Parquet: row groups of the file's
   bytes). Each range is ``ray.put`` into the object store as soon as it is cut (the driver holds one
   range at a time) and passed to its actor by reference: **actors never open the corpus path**.
2. Each actor decodes and parses its range (``ray_shard.Shard.parse``) and returns how many non-empty records
   it holds (JSONL without ``--text-column``: the keys it saw; the driver picks the column and the
   actors parse again with it).
3. The driver sends each actor the non-empty records before its range; the actor samples with the
   generator advanced past them (``ray_shard.Shard.select``) and returns how many it picked.
4. The driver cuts ``--max-sentences`` from the running totals; each actor keeps its room, tokenizes
   the kept sentences (``ray_shard.Shard.keep``) and returns their text, their encoding and its counts.
5. The driver concatenates them in range order: the ``CorpusText`` of ``load_sentences`` and the
   encoding one process makes (``shares.merge_encoded``), from which ``run_plan.make_plan`` builds the plan.

Each phase gets the range again (an object-store reference), so an actor restarted between phases
recomputes what it lost. A range that cannot be decoded or parsed fails in its actor; the driver then
reads the file itself (``load_sentences``), which raises the whole-file reader's error. CSV is not cut
(a quoted cell may hold a newline): the driver reads it and shares the kept sentences
(``shares.split_shares``), which the actors tokenize.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus import ranges
from normvar_core.pipeline.corpus.dataset import dataset_cut
from normvar_core.pipeline.corpus.formats import corpus_format, resolve_corpus_path
from normvar_core.pipeline.corpus.read import load_sentences
from normvar_core.pipeline.corpus.shares import encoded_arrays, pack_strings, unpack_strings
from normvar_core.pipeline.encoding import encode_sentences


def cut_for_actors(cfg, data_dir, k: int, put) -> dict | None:
    """The driver's cut (``ranges.cut_ranges``) into ``k`` ranges, each ``put`` into the object store as
    soon as it is cut; None for CSV (read by the driver). A dataset: one shard per actor (``dataset.dataset_cut``)."""
    if cfg.dataset:
        return dataset_cut(cfg, k, put)
    fmt = corpus_format(resolve_corpus_path(cfg.corpus, data_dir))
    if fmt not in (*ranges.LINE_FORMATS, ".parquet"):
        return None
    return ranges.cut_ranges(cfg, k, data_dir, put=put)


def read_on_actors(ray, actors: list, cfg, cut: dict, data_dir) -> tuple:
    """(CorpusText, [phase-3 parts in range order]) — see the module docstring."""
    shares = ranges.shares_of(cut)  # "data": an object-store reference, resolved by Ray for the actor
    pairs = [
        (actors[i % len(actors)], ({k: v for k, v in s.items() if k != "data"}, s["data"]))
        for i, s in enumerate(shares)
    ]

    def get(calls: list):
        try:
            return ray.get(calls)
        except Exception as exc:
            load_sentences(cfg, data_dir)
            raise NormvarError(
                f"a Ray shard (reading the corpus) failed: {str(exc).splitlines()[0][:200]}", fix="see the Ray logs"
            ) from None

    column = cut.get("column") or cfg.text_column or None
    infos = get([a.parse.remote(*ref, column) for a, ref in pairs])
    if cut["format"] == ".jsonl":  # the column and its errors as the whole-file reader has them
        column = ranges.jsonl_column(infos, cfg.text_column, Path(cut["path"]))
        if not cfg.text_column:
            infos = get([a.parse.remote(*ref, column) for a, ref in pairs])
    skips = ranges.skips([int(i["n_nonempty"]) for i in infos])
    picked = get([a.select.remote(*ref, column, s) for (a, ref), s in zip(pairs, skips)])
    rooms = ranges.rooms(cfg, [int(p) for p in picked])
    parts = get([a.keep.remote(*ref, column, s, r) for (a, ref), s, r in zip(pairs, skips, rooms)])
    for p in parts:
        p["sentences"] = unpack_strings({"utf8": p.pop("kept_utf8"), "ends": p.pop("kept_ends")})
    text_column = column if cut["format"] in (".jsonl", ".parquet", ".dataset") else None
    corpus = ranges.merge_selections(
        cfg,
        cut,
        parts,
        n_not_text=sum(int(i["n_not_text"]) for i in infos),
        n_null=sum(int(i["n_null"]) for i in infos),
        column=text_column,
    )
    return corpus, parts


class RangeState:
    """An actor's corpus range between the phases; what a restarted actor lost is recomputed from the
    range (each phase gets it again). ``cpu_s``: this process's CPU seconds spent parsing and selecting."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.key = self.records = self.skip = self.sel = None
        self.cpu_s = 0.0

    def parse(self, share: dict, column: str | None) -> dict:
        t0 = time.process_time()
        self.records, info = ranges.parse_range(self.cfg, share, column)
        self.key, self.skip, self.sel = (int(share["index"]), column), None, None
        self.cpu_s += time.process_time() - t0
        return info

    def selection(self, share: dict, column: str | None, skip: int):
        if self.key != (int(share["index"]), column):
            self.parse(share, column)
        if self.skip != int(skip):
            t0 = time.process_time()
            self.sel, self.skip = ranges.select_range(self.cfg, self.records, int(skip)), int(skip)  # type: ignore[arg-type]  # records are parsed first
            self.cpu_s += time.process_time() - t0
        return self.sel


def actor_keep(cfg, sel, room: int, tokenizer, max_length: int, prior_cpu_s: float = 0.0) -> dict:
    """An actor's phase 3: ``ranges.keep_range`` and the kept sentences' encoding, as plain values;
    ``cpu_s``: CPU seconds of the tokenization, ``read_cpu_s``: of phase 3 plus ``prior_cpu_s`` (the
    range's parse and selection, ``RangeState.cpu_s``)."""
    t_keep = time.process_time()
    part = ranges.keep_range(sel, room)
    t0 = time.process_time()
    enc = encode_sentences(part["sentences"], tokenizer, max_length=max_length, unit=cfg.unit)
    packed = pack_strings(part.pop("sentences"))
    return dict(
        part,
        **encoded_arrays(enc),
        kept_utf8=packed["utf8"],
        kept_ends=packed["ends"],
        cpu_s=np.float64(time.process_time() - t0),
        read_cpu_s=np.float64(prior_cpu_s + time.process_time() - t_keep),
        max_length=int(max_length),
        unit=str(cfg.unit),
    )


__all__ = ["cut_for_actors", "read_on_actors", "RangeState", "actor_keep"]
