"""The ``run`` row of a run file as a typed record.

``RunRecord`` has one attribute per column (the schema may only grow: a file written by an older
normvar lacks the newer columns, which read as their defaults). ``Run.meta`` keeps the same row
as a plain dict for SQL-minded callers; code should prefer ``Run.record``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

# column name -> DuckDB type, in file order (older files hold a prefix of these, in this order)
RUN_COLUMNS: list[tuple[str, str]] = [
    ("name", "VARCHAR"),
    ("model", "VARCHAR"),
    ("revision", "VARCHAR"),
    ("weights_hash", "VARCHAR"),
    ("architecture", "VARCHAR"),
    ("norm_placement", "VARCHAR"),
    ("norm_type", "VARCHAR"),
    ("final_norm", "BOOLEAN"),
    ("num_layers", "INTEGER"),
    ("dim", "INTEGER"),
    ("layers", "INTEGER[]"),
    ("corpus_name", "VARCHAR"),
    ("corpus_sha256", "VARCHAR"),
    ("options", "VARCHAR"),
    ("n_sentences", "BIGINT"),
    ("n_truncated", "BIGINT"),
    ("n_embeddings", "BIGINT"),
    ("n_types", "BIGINT"),
    ("device", "VARCHAR"),
    ("dtype", "VARCHAR"),
    ("seconds", "DOUBLE"),
    ("versions", "VARCHAR"),
    ("created_at", "TIMESTAMP"),
    ("notes", "VARCHAR"),
    # schema 2: the pipeline's stages
    ("source", "VARCHAR"),
    ("accumulators", "VARCHAR"),
    ("sweep", "VARCHAR"),
    ("step", "BIGINT"),
    ("unit", "VARCHAR"),
    ("schema_version", "INTEGER"),
    ("stack", "VARCHAR"),  # encoder-decoders: "encoder" or "decoder"; NULL for one-stack models
    ("dataset", "VARCHAR"),  # a --dataset corpus: {id, kind, config, split, revision, fingerprint|commit|sha256}
    ("device_map", "VARCHAR"),  # --device-map: {module: "cuda:k" | "cpu" | "disk"} as it ran; {} in one piece
]
JSON_COLUMNS = ("options", "versions", "notes", "accumulators", "dataset", "device_map")
SCHEMA_VERSION = 2


@dataclass
class RunRecord:
    """One run's metadata. ``num_layers`` = transformer blocks of the model (hidden states 0..L);
    ``layers`` = the hidden-state indices stored; ``accumulators`` = the measures the run holds
    (old files: inferred from their tables); ``source`` = 'model' or 'null:<kind>:<run>'."""

    name: str | None = None
    model: str | None = None
    revision: str | None = None
    weights_hash: str | None = None
    architecture: str | None = None
    norm_placement: str | None = None
    norm_type: str | None = None
    final_norm: bool | None = None
    num_layers: int | None = None
    dim: int | None = None
    layers: list[int] = field(default_factory=list)
    corpus_name: str | None = None
    corpus_sha256: str | None = None
    options: dict = field(default_factory=dict)
    n_sentences: int | None = None
    n_truncated: int | None = None
    n_embeddings: int | None = None
    n_types: int | None = None
    device: str | None = None
    dtype: str | None = None
    seconds: float | None = None
    versions: dict = field(default_factory=dict)
    created_at: Any = None
    notes: dict = field(default_factory=dict)
    source: str | None = "model"
    accumulators: list[str] = field(default_factory=list)
    sweep: str | None = None
    step: int | None = None
    unit: str | None = "token"
    schema_version: int | None = SCHEMA_VERSION
    stack: str | None = None
    dataset: dict = field(default_factory=dict)
    """A corpus read with ``--dataset`` (``corpus.dataset``): where it came from; {} for a corpus file."""
    device_map: dict = field(default_factory=dict)
    """Where each module ran (--device-map, accelerate's resolved ``hf_device_map``); {}: the model in one piece."""

    @classmethod
    def from_dict(cls, meta: dict) -> RunRecord:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(meta) - known)
        if unknown:
            raise ValueError(f"unknown run meta field(s): {unknown}")
        return cls(**{k: v for k, v in meta.items() if v is not None or k not in ("layers",)})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_row(self) -> dict:
        """The row as stored: JSON columns serialized, created_at a naive UTC timestamp."""
        row = self.to_dict()
        for c in JSON_COLUMNS:
            if row[c] is not None and not isinstance(row[c], str):
                row[c] = json.dumps(row[c], sort_keys=True, default=str)
        ts = row["created_at"] or _dt.datetime.now(_dt.UTC)
        if isinstance(ts, str):
            ts = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
        if ts.tzinfo is not None:
            ts = ts.astimezone(_dt.UTC).replace(tzinfo=None)
        row["created_at"] = ts
        row["layers"] = [int(x) for x in (row["layers"] or [])]
        return row


__all__ = ["RunRecord", "RUN_COLUMNS", "JSON_COLUMNS", "SCHEMA_VERSION"]
