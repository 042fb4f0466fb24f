"""Hugging Face datasets as corpora (``--dataset``), read through the ``datasets`` library, offline.

Three kinds of source, tried in this order:

- **data files**: ``.parquet``, ``.json``/``.jsonl``, ``.csv``, ``.arrow`` (comma-separated, globs allowed),
  streamed (``streaming=True``) by the library's packaged builder of that type; the split is named
  ``--split`` (default ``train``). Recorded: the sha256 of the split's files' bytes, in order.
- **a folder**: written by ``save_to_disk`` (``state.json`` or ``dataset_dict.json``: opened with
  ``load_from_disk`` for its splits, columns and rows; a whole pass streams its Arrow files in order with the
  ``arrow`` builder; recorded: the sha256 of those Arrow files' bytes, in order — the data itself, not the
  ``_fingerprint`` of ``state.json``, which stays the same when the Arrow data is rewritten; one with no rows
  is refused), else a folder of data files (a dataset repository's layout, its README's configurations
  honoured; streamed; recorded: the sha256 of the split's files); a folder holding neither (a README, text
  files) is not a dataset and is refused.
- **a Hub id** (``user/name``), never downloaded: ``HF_DATASETS_OFFLINE=1`` and ``HF_HUB_OFFLINE=1`` are
  set before ``datasets`` is imported. First a snapshot in the Hub cache (``$HF_HUB_CACHE/datasets--user--
  name``, as ``snapshot_download`` or ``huggingface-cli download --repo-type dataset`` leave it; the
  revision a branch in ``refs/`` or a commit in ``snapshots/``); else the ``datasets`` cache
  (``$HF_DATASETS_CACHE/user___name/<config>/<version>/<commit>``, as an earlier ``load_dataset`` left it),
  streamed from its Arrow files. Recorded: the Hub commit sha.

The text column is ``--text-column`` or the only string column (``formats.pick_column``: the same errors
as a table file); a column that is not a string column is refused. Each row's cell is one record for
``Selection`` (null = empty), in the dataset's order: the same sentences as the lines of a text file give
the same run. Every check (source, configuration, split, column) runs in ``open_dataset`` before a row is
read, so ``run_target`` and the job submission refuse a bad dataset before any model loads.

The Ray executor's actors each read one contiguous shard (``DatasetSource.shard``: ``Dataset.shard`` over
rows, ``IterableDataset.shard`` over the source's files, ``contiguous=True``), so the shards in order are
the whole dataset in order, and ``corpus.ranges`` samples them as one pass does.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normvar_core.config import dataset_stem
from normvar_core.destination import check_regular_input
from normvar_core.errors import NormvarError
from normvar_core.pipeline.corpus.formats import pick_column

ROWS = 1_000
BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv", ".arrow": "arrow"}
STRING_TYPES = ("string", "large_string", "string_view")
FORMAT = ".dataset"  # CorpusText.format of a dataset corpus


def datasets_offline():
    """The ``datasets`` module with every network path closed (the variables are read at its import)."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    datasets.config.HF_HUB_OFFLINE = True  # in case it was imported before
    # not even its error lines: the library logs a failed read with the file's resolved path (a link's target);
    # normvar's own line says what failed
    datasets.utils.logging.set_verbosity(datasets.utils.logging.CRITICAL)
    datasets.disable_progress_bars()
    return datasets


@dataclass
class DatasetSource:
    """One opened dataset split: its rows (not read yet), its text column and its provenance."""

    ds: Any  # datasets.Dataset (save_to_disk) or datasets.IterableDataset (streamed)
    column: str
    label: str  # the corpus name a run records
    digest: str  # fingerprint, Hub commit or sha256 of the files: the run's corpus_sha256
    provenance: dict = field(default_factory=dict)
    stream: Any = None  # a save_to_disk folder's Arrow files streamed in order (a whole pass reads these)

    @property
    def n_shares(self) -> int:
        """Contiguous shards the rows can be read in apart: rows of a map-style dataset, else source files."""
        return int(self.ds.num_rows) if hasattr(self.ds, "num_rows") else int(self.ds.num_shards)

    def shard(self, index: int, num: int):
        return self.ds.shard(num_shards=int(num), index=int(index), contiguous=True)

    def cells(self, index: int | None = None, num: int | None = None) -> Iterator[list]:
        """The text column's cells in batches of ``ROWS``, of shard ``index`` of ``num`` (default all)."""
        ds = (self.ds if self.stream is None else self.stream) if index is None else self.shard(index, num)  # type: ignore[arg-type]  # with index
        try:
            # Arrow batches, converted here: the library's Python formatting grew the peak by ~40 MB over 1M rows
            for batch in ds.select_columns([self.column]).with_format("arrow").iter(batch_size=ROWS):
                yield batch.column(self.column).to_pylist()
        except (OSError, ValueError, TypeError) as exc:  # pyarrow's errors are ValueError/OSError subclasses
            raise NormvarError(
                f"cannot read dataset {self.label}: {_first_line(exc)}",
                fix="check that its files are complete and of one schema",
            ) from None

    def feed(self, sink, index: int | None = None, num: int | None = None) -> None:
        """Every cell to ``sink.add`` as a record (null -> ''; a non-string value: '' and ``n_not_text``)."""
        for values in self.cells(index, num):
            sink.n_not_text += sum(v is not None and not isinstance(v, str) for v in values)
            sink.add([v if isinstance(v, str) else "" for v in values])


def open_dataset(cfg, *, hash_files: bool = True) -> DatasetSource:
    """Resolve ``cfg.dataset`` (module docstring); a NormvarError names what is wrong before any row is read.
    ``hash_files=False``: the checks only (data files' sha256 not computed)."""
    spec = str(cfg.dataset).strip()
    files = _data_files(spec)
    path = Path(spec).expanduser()
    if files is None and path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
        return _from_disk(cfg, path, hash_files=hash_files)
    datasets = datasets_offline()
    if files is not None:
        builder = _builder(datasets, BUILDERS[files[1]], cfg, data_files={cfg.split or "train": files[0]})
        return _streamed(cfg, builder, label=dataset_stem(files[0][0]), kind="files", hash_files=hash_files)
    if path.is_dir():
        _check_data_folder(path)
        return _streamed(
            cfg, _builder(datasets, str(path.resolve()), cfg), label=path.name, kind="folder", hash_files=hash_files
        )
    if _looks_like_hub_id(spec):
        snap = hub_snapshot(spec, cfg.dataset_revision)
        if snap is not None:
            builder = _builder(datasets, str(snap), cfg)
            return _streamed(cfg, builder, label=spec.split("/")[-1], kind="hub", commit=snap.name)
        return _streamed(cfg, _cached_builder(datasets, spec, cfg), label=spec.split("/")[-1], kind="hub")
    raise NormvarError(
        f"dataset not found: {spec!r} is not a data file, a folder or a Hub id in the local cache",
        fix="pass a save_to_disk folder, data files (.parquet/.json/.jsonl/.csv/.arrow) or the id of "
        "a dataset downloaded before (normvar reads Hub datasets offline)",
    )


def check_dataset(cfg) -> None:
    """The checks of ``open_dataset`` (for ``run_target`` and the job submission); nothing when no dataset."""
    if cfg.dataset:
        open_dataset(cfg, hash_files=False)


def absolute_dataset(spec: str) -> str:
    """``spec`` with its local paths absolute (a job's worker may run elsewhere); Hub ids unchanged."""
    items = [s.strip() for s in spec.split(",")]
    local = [
        Path(s).expanduser().exists() or any(c in s for c in "*?[") or s.lower().endswith(tuple(BUILDERS))
        for s in items
    ]
    return ",".join(str(Path(s).expanduser().absolute()) if is_local else s for s, is_local in zip(items, local))


# ----------------------------------------------------------------------------- the sources
def _data_files(spec: str) -> tuple[list[str], str] | None:
    """(files, suffix) when ``spec`` names data files (every item ends with one supported suffix); else None."""
    import glob

    items = [s.strip() for s in spec.split(",") if s.strip()]
    suffixes = {next((x for x in BUILDERS if s.lower().endswith(x)), None) for s in items}
    if not items or None in suffixes:
        return None
    if len({BUILDERS[s] for s in suffixes}) > 1:  # type: ignore[index]  # None excluded above
        raise NormvarError(f"dataset files of several types: {spec}", fix="pass files of one type")
    if len(items) == 1 and Path(items[0]).expanduser().is_dir():
        return None  # a folder named like a file (x.json): read as a folder
    files: list[str] = []
    for item in items:
        found = (
            sorted(glob.glob(os.path.expanduser(item)))
            if any(c in item for c in "*?[")
            else [os.path.expanduser(item)]
            if os.path.lexists(os.path.expanduser(item))
            else []
        )
        if not found:
            raise NormvarError(f"dataset file not found: {item}", fix="check the path (globs: quote them)")
        for f in found:  # a folder, a FIFO (whose read would block), a device: one line before anything reads it
            check_regular_input(
                f, "--dataset", "pass data files (.parquet/.json/.jsonl/.csv/.arrow), a folder or a Hub id"
            )
        # the names as given (a link's target is never named in a message or recorded)
        files.extend(os.path.abspath(f) for f in found)
    return files, suffixes.pop()  # type: ignore[return-value]  # None excluded above


def _check_data_folder(path: Path) -> None:
    """A folder given as ``--dataset`` holds data files (``BUILDERS``' suffixes, outside hidden folders); else
    one line: a README or text files are no dataset (``datasets`` would read any file as text)."""
    for _root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(n.lower().endswith(tuple(BUILDERS)) for n in names if not n.startswith(".")):
            return
    raise NormvarError(
        f"--dataset {path} holds no dataset: neither save_to_disk files (state.json, "
        f"dataset_dict.json) nor data files ({', '.join(BUILDERS)})",
        fix="pass a save_to_disk folder or data files, or a text file as --corpus",
    )


def _from_disk(cfg, path: Path, *, hash_files: bool = True) -> DatasetSource:
    datasets = datasets_offline()
    for option in ("dataset_config", "dataset_revision"):
        if getattr(cfg, option):
            raise NormvarError(
                f"--{option.replace('_', '-')} does not apply to a save_to_disk folder ({path.name})",
                fix=f"drop --{option.replace('_', '-')}",
            )
    try:
        loaded = datasets.load_from_disk(str(path))
    except IndexError:  # the library's own failure on a dataset saved with no rows (no Arrow table to concatenate)
        raise NormvarError(f"dataset {path.name} has no rows", fix="pass a dataset with text in it") from None
    except (OSError, ValueError, KeyError) as exc:
        raise NormvarError(
            f"cannot read the save_to_disk folder {path}: {_first_line(exc)}",
            fix="write it again with Dataset.save_to_disk",
        ) from None
    split: str | None
    if isinstance(loaded, datasets.DatasetDict):
        split = pick_split(list(loaded), cfg.split, path.name)
        ds = loaded[split]
    else:
        split = str(loaded.split) if loaded.split is not None else None
        if cfg.split and cfg.split != split:
            raise NormvarError(
                f"split {cfg.split!r} not in {path.name}: it holds one dataset"
                + (f" (split {split!r})" if split else " without splits"),
                fix="drop --split",
            )
        ds = loaded
    if int(ds.num_rows) == 0:
        raise NormvarError(
            f"dataset {path.name}" + (f" (split {split!r})" if split else "") + " has no rows",
            fix="pass a dataset with text in it",
        )
    column = text_column(ds.features, cfg.text_column, path.name)
    folder = path / split if isinstance(loaded, datasets.DatasetDict) else path  # type: ignore[operator]  # a DatasetDict has its split
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    # the whole pass streams the folder's Arrow files in order (record batch by record batch, no memory map
    # whose pages would stay resident): save_to_disk wrote them in the dataset's order, indices flattened
    arrow_files = [str(folder / f["filename"]) for f in state["_data_files"]]
    arrow = _builder(datasets, "arrow", cfg, data_files={"train": arrow_files})
    stream = _scan_lightly(arrow).as_streaming_dataset(split="train")
    # the data's own hash: state.json's _fingerprint stays the same when the Arrow files are rewritten
    fingerprint = files_sha256(arrow_files) if hash_files else ""
    prov = dict(
        id=str(path.resolve()),
        kind="save_to_disk",
        config=None,
        split=split,
        revision=None,
        fingerprint=fingerprint,
        text_column=column,
        rows=int(ds.num_rows),
    )
    return DatasetSource(ds, column, path.name, fingerprint, prov, stream=stream)


def _scan_lightly(builder):
    """A Parquet builder set to read without pre-buffering (its buffers stayed allocated: the peak grew with
    the file) in batches of ``ROWS`` (default: a whole row group); other builders unchanged."""
    if hasattr(builder.config, "fragment_scan_options") and builder.config.fragment_scan_options is None:
        import pyarrow.dataset as pads

        builder.config.fragment_scan_options = pads.ParquetFragmentScanOptions(pre_buffer=False)
        builder.config.batch_size = builder.config.batch_size or ROWS
    return builder


def _builder(datasets, path: str, cfg, data_files=None):
    """``load_dataset_builder`` (no data read); the library's refusals as one NormvarError line."""
    try:
        return datasets.load_dataset_builder(path, name=cfg.dataset_config, data_files=data_files)
    except Exception as exc:
        raise _refused(cfg, exc) from None


def _cached_builder(datasets, spec: str, cfg):
    """A Hub id from the ``datasets`` cache (the library's offline path), at ``--dataset-revision`` if given."""
    builder = _builder(datasets, spec, cfg)
    commit = str(builder.hash or "")
    if cfg.dataset_revision and not commit.startswith(cfg.dataset_revision):
        raise NormvarError(
            f"revision {cfg.dataset_revision!r} of dataset {spec} is not in the local cache "
            f"(cached: {commit[:12] or 'none'})",
            fix="drop --dataset-revision, or cache that revision",
        )
    return builder


def _streamed(
    cfg, builder, *, label: str, kind: str, commit: str | None = None, hash_files: bool = True
) -> DatasetSource:
    """One split of ``builder`` streamed (``as_streaming_dataset``), checked, with its provenance."""
    files = dict(builder.config.data_files or {})
    split = pick_split(list(files) if files else list(builder.info.splits or {}), cfg.split, label)
    try:
        ds = _scan_lightly(builder).as_streaming_dataset(split=split)
        features = ds.features if ds.features is not None else ds._resolve_features().features  # reads one batch
    except Exception as exc:
        raise _refused(cfg, exc) from None
    column = text_column(features, cfg.text_column, label)
    prov = dict(
        id=str(cfg.dataset).strip() if kind == "hub" else ",".join(map(str, files.get(split) or [])) or label,
        kind=kind,
        config=builder.config.name,
        split=split,
        revision=cfg.dataset_revision,
        text_column=column,
    )
    if kind == "hub":
        prov["commit"] = digest = commit or str(builder.hash)
    else:
        prov["sha256"] = digest = files_sha256(files.get(split) or []) if hash_files else ""
    return DatasetSource(ds, column, label, digest, prov)


def hub_snapshot(repo_id: str, revision: str | None) -> Path | None:
    """The snapshot folder of a Hub dataset in the Hub cache at ``revision`` (a branch or tag in refs/, or a
    commit; default main), else None."""
    from huggingface_hub.constants import HF_HUB_CACHE

    repo = Path(HF_HUB_CACHE) / ("datasets--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / (revision or "main")
    commit = ref.read_text().strip() if ref.is_file() else revision
    if commit and (repo / "snapshots" / commit).is_dir():
        return repo / "snapshots" / commit
    if revision and (repo / "snapshots").is_dir():
        hits = [p for p in (repo / "snapshots").iterdir() if p.name.startswith(revision)]
        return hits[0] if len(hits) == 1 else None
    return None


# ----------------------------------------------------------------------------- checks
def pick_split(available: list[str], wanted: str | None, label: str) -> str:
    if wanted:
        if wanted not in available:
            raise NormvarError(
                f"split {wanted!r} not in dataset {label}; splits: {', '.join(available) or 'none'}",
                fix=f"pass --split with one of: {', '.join(available)}",
            )
        return wanted
    if "train" in available or len(available) == 1:
        return "train" if "train" in available else available[0]
    raise NormvarError(
        f"dataset {label} has no train split; splits: {', '.join(available) or 'none'}", fix="pass --split NAME"
    )


def text_column(features, wanted: str | None, label: str) -> str:
    """``wanted`` or the only string column (``formats.pick_column``); a column of another type is refused."""
    features = dict(features or {})
    text = [k for k, f in features.items() if getattr(f, "dtype", None) in STRING_TYPES]
    return pick_column(list(features), text, wanted, Path(label))


def _refused(cfg, exc: Exception) -> NormvarError:
    msg = _first_line(exc)
    if isinstance(exc, ConnectionError) or "OfflineModeIsEnabled" in msg:
        return NormvarError(
            f"dataset {cfg.dataset} is not in the local Hugging Face cache ($HF_HOME/hub or "
            "$HF_HOME/datasets) and normvar never downloads",
            fix="download it once (datasets.load_dataset or huggingface-cli download --repo-type "
            "dataset), or pass a save_to_disk folder or data files",
        )
    if "BuilderConfig" in msg or "config" in msg.lower():
        return NormvarError(f"dataset {cfg.dataset}: {msg}", fix="pass --dataset-config with one of its configurations")
    return NormvarError(
        f"cannot open dataset {cfg.dataset}: {msg}",
        fix="check --dataset (offline: only datasets in the local Hugging Face cache)",
    )


def files_sha256(files: list) -> str:
    """sha256 of the files' bytes, concatenated in order (one file: its own sha256)."""
    h = hashlib.sha256()
    for f in files:
        with open(str(f), "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()


def _looks_like_hub_id(spec: str) -> bool:
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", spec)) and not spec.startswith((".", "/", "~"))


def _first_line(exc: Exception) -> str:
    """The error's message on one line (its first two lines: the library puts what is available second)."""
    return "; ".join(str(exc).strip().splitlines()[:2] or [type(exc).__name__])[:300]


def dataset_cut(cfg, k: int, put) -> dict:
    """The Ray driver's cut of a dataset (``ray_corpus.cut_for_actors``): at most ``k`` contiguous shards, each
    share only its (index, count), ``put`` into the object store; the actors open the dataset themselves
    and each reads its own shard (``corpus.ranges.parse_range``)."""
    src = open_dataset(cfg)
    n = max(1, min(int(k), src.n_shares))
    ranges = [put(json.dumps({"index": i, "num": n}).encode()) for i in range(n)]
    return dict(
        path=Path(src.label),
        name=src.label,
        format=FORMAT,
        sha256=src.digest,
        ranges=ranges,
        column=src.column,
        dataset=src.provenance,
    )


__all__ = [
    "DatasetSource",
    "open_dataset",
    "check_dataset",
    "dataset_cut",
    "absolute_dataset",
    "hub_snapshot",
    "pick_split",
    "text_column",
    "files_sha256",
    "datasets_offline",
    "FORMAT",
]
