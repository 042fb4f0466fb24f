"""The measure classes (``normvar_core/pipeline/measures/``) against what the rest of the code derives from
them: ``MEASURES`` keeps today's order and names (the run row's ``accumulators`` values and ``notes.skipped`` keys
of files already written), a measure's used results finish before it, no two measures write the same table,
RunConfig keeps every option (names and order frozen here), every measure switch round-trips through the CLI and
appears in the New-run form and is what ``asked`` reads, and a run file older than the ``accumulators`` column
still reads, with the required tables checked."""
from __future__ import annotations

import argparse
import dataclasses
import shutil

import duckdb
import pytest

from normvar_core.config import RunConfig, field_kind
from normvar_core.errors import NormvarError
from normvar_core.pipeline.measures import (MEASURES, GeometryMeasure, HalvesMeasure, MomentsMeasure,
                                            OccurrencesMeasure, OutlierMeasure, SampleMeasure,
                                            SelfSimilarityMeasure)
from normvar_core.runs.schema import LEGACY_MARKERS, MEASURE_TABLES, REQUIRED_TABLES

# the run row's ``accumulators`` values of every file written so far: never renamed
NAMES = ["moments", "samples", "geometry", "selfsim", "outliers", "halves", "occurrences"]

# RunConfig().to_dict() keys in field order (= CLI --help order and New-run form order)
OPTIONS = ["model", "corpus", "name", "revision", "stack", "gguf_file", "trust_remote_code", "dataset",
           "dataset_config", "split", "dataset_revision", "text_column", "split_sentences", "max_words", "sample_frac",
           "seed", "max_sentences", "exclude_special", "exclude_position0", "allow_unknown", "max_length",
           "batch_size", "device", "dtype", "layers", "mean_dtype", "samples_per_token", "geometry", "halves",
           "id_sample", "occurrences", "self_similarity", "memory_gb", "scatter_dtype", "executor", "ray_address",
           "workers", "device_map", "max_memory", "offload_folder", "gpus_per_worker", "unit", "sweep", "step"]

# each measure switch: the class whose ``asked`` reads it and the value meaning "not asked for"
SWITCHES = {"samples_per_token": (SampleMeasure, 0), "geometry": (GeometryMeasure, False),
            "halves": (HalvesMeasure, False), "occurrences": (OccurrencesMeasure, 0),
            "self_similarity": (SelfSimilarityMeasure, "off")}
OPTIONS_OF_MEASURES = ["samples_per_token", "geometry", "halves", "id_sample", "occurrences", "self_similarity"]


def test_measures_keep_todays_names_and_order():
    assert [c.name for c in MEASURES] == NAMES
    for i, cls in enumerate(MEASURES):  # a measure's used results are finished before it (registry order)
        assert set(cls.uses_results) <= {c.name for c in MEASURES[:i]}, cls.name
        assert set(cls.uses_states) <= {c.name for c in MEASURES} - {cls.name}, cls.name
        assert cls.title and cls.policy and cls.table_names == MEASURE_TABLES[cls.name]
    assert GeometryMeasure.title == "spectra, TwoNN, seed 004's batches"  # the finalize label, unchanged
    assert [c.name for c in MEASURES if c.finalize_in_background] == ["geometry"]


def test_tables_are_unique_and_required_ones_declared():
    tables = [t for ts in MEASURE_TABLES.values() for t in ts]
    assert len(tables) == len(set(tables)), sorted(t for t in tables if tables.count(t) > 1)
    assert list(MEASURE_TABLES) == NAMES
    for name, required in REQUIRED_TABLES.items():
        assert set(required) <= set(MEASURE_TABLES[name])
    assert all(t in MEASURE_TABLES[name] for t, name in LEGACY_MARKERS.items())
    assert REQUIRED_TABLES == {"moments": ("token_stats", "token_means", "layer_stats", "frequency_hist"),
                               "samples": ("samples",)}
    assert MEASURE_TABLES["geometry"] == ("layer_geometry", "layer_spectrum", "pair_cosines", "twonn_decimation")


def test_runconfig_keeps_every_option_in_order():
    assert list(RunConfig().to_dict()) == OPTIONS
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    assert {n: fields[n].metadata["flag"] for n in ("geometry", "halves")} == {"geometry": "--no-geometry",
                                                                              "halves": "--no-halves"}
    assert fields["self_similarity"].metadata["choices"] == ("auto", "on", "off")


def _other_value(f):
    """A valid value of RunConfig field ``f`` other than its default, as a CLI argument list and as the parsed value."""
    kind, meta = field_kind(f), f.metadata
    flag = meta["flag"] or "--" + f.name.replace("_", "-")
    if kind is bool:
        return [flag], not f.default
    if meta["choices"]:
        value = next(c for c in meta["choices"] if c != f.default)
    else:
        value = f.default + 1 if meta["maximum"] is None or f.default + 1 <= meta["maximum"] else f.default - 1
    return [flag, str(value)], value


@pytest.mark.parametrize("name", OPTIONS_OF_MEASURES)
def test_every_switch_round_trips_through_the_cli_and_the_form(name):
    from views._form import SPECIAL, config_fields

    f = next(f for f in dataclasses.fields(RunConfig) if f.name == name)
    parser = argparse.ArgumentParser()
    RunConfig.add_arguments(parser)
    argv, value = _other_value(f)
    cfg = RunConfig.from_args(parser.parse_args(argv))
    assert getattr(cfg, name) == value and RunConfig.from_dict(cfg.to_dict()) == cfg
    assert getattr(RunConfig.from_args(parser.parse_args([])), name) == f.default
    assert name in SPECIAL or name in [g.name for g in config_fields(f.metadata["section"])]
    if name in SWITCHES:  # the switch's off value is what ``asked`` reads
        cls, off = SWITCHES[name]
        assert cls.asked(RunConfig(**{name: f.default})) == (f.default != off)
        assert not cls.asked(RunConfig(**{name: off}))


def test_followers_and_droppers_read_their_switch():
    cfg = RunConfig(geometry=False)
    assert not OutlierMeasure.asked(cfg) and OutlierMeasure.asked(RunConfig())
    assert MomentsMeasure.asked(cfg) and not MomentsMeasure.may_drop(RunConfig())
    assert SelfSimilarityMeasure.may_drop(RunConfig())
    assert not SelfSimilarityMeasure.may_drop(RunConfig(self_similarity="on"))
    assert [c.name for c in MEASURES if c.may_drop(RunConfig())] == ["geometry", "selfsim", "halves", "occurrences"]
    assert [c.name for c in MEASURES if c.fix] == ["selfsim"]


def test_an_old_format_run_file_still_reads(written_run_path, tmp_path):  # noqa: F811 - the fixture
    """A file written before the ``accumulators`` column: the measures it holds come from the legacy markers
    (``runs.schema.LEGACY_MARKERS``), and the required tables are checked (a missing one names the damage)."""
    from normvar_core.runs.reader import open_run

    old = tmp_path / "old.duckdb"
    shutil.copy(written_run_path, old)
    con = duckdb.connect(str(old))
    con.execute("UPDATE run SET accumulators = NULL")
    con.execute("CHECKPOINT")
    con.close()
    run = open_run(old)
    assert run.measures == ["moments", "samples"]
    assert run.has("samples") and run.stats().num_types == run.meta["n_types"]

    con = duckdb.connect(str(old))
    con.execute('DROP TABLE "token_means"')
    con.execute("CHECKPOINT")
    con.close()
    with pytest.raises(NormvarError, match="missing table.*token_means"):
        open_run(old)
