"""The measure declarations (``normvar_core/measures/``, issue 36) against what the rest of the code derives from
them: every reference resolves to an object of the right layer, the registry keeps today's order and names (the
run row's ``accumulators`` values and ``notes.skipped`` keys of files already written), no two measures write
the same table, RunConfig keeps every option (names and order frozen here), every declared switch round-trips
through the CLI and appears in the New-run form, and a run file older than the ``accumulators`` column still
reads, with the declared required tables checked."""
from __future__ import annotations

import argparse
import dataclasses
import shutil

import duckdb
import pytest

from normvar_core.config import RunConfig, field_kind
from normvar_core.errors import NormvarError
from normvar_core.measure import Measure, all_measures, measure, resolve

# the run row's ``accumulators`` values of every file written so far: never renamed
NAMES = ["moments", "samples", "geometry", "selfsim", "outliers", "halves", "occurrences"]

# RunConfig().to_dict() keys in field order (= CLI --help order and New-run form order) before the declarations
OPTIONS = ["model", "corpus", "name", "revision", "stack", "gguf_file", "trust_remote_code", "dataset",
           "dataset_config", "split", "dataset_revision", "text_column", "split_sentences", "max_words", "sample_frac",
           "seed", "max_sentences", "exclude_special", "exclude_position0", "allow_unknown", "max_length",
           "batch_size", "device", "dtype", "layers", "mean_dtype", "samples_per_token", "geometry", "halves",
           "id_sample", "occurrences", "self_similarity", "memory_gb", "scatter_dtype", "executor", "ray_address",
           "workers", "device_map", "max_memory", "offload_folder", "gpus_per_worker", "unit", "sweep", "step"]

# the layer each kind of reference must live in (the declarations are in the bottom layer: a reference is the
# only way they name behaviour, and it must point where that behaviour belongs)
REF_LAYERS = {"accumulator": "normvar_core.pipeline.", "prime": "normvar_core.pipeline.",
              "spectral": "normvar_core.stats.", "rule": "normvar_core.stats.", "builder": "normvar_core.viz.",
              "slide": "normvar_core.report."}


def _refs(m: Measure) -> list[tuple[str, str]]:
    """(kind, reference) of every ``Ref`` a declaration holds."""
    out = [(k, getattr(m, k)) for k in ("accumulator", "prime") if getattr(m, k)]
    out += [("spectral", ref) for _, ref in m.spectral]
    out += [("rule", c.rule) for c in m.claims]
    out += [(k, getattr(f, k)) for f in m.figures for k in ("builder", "slide") if getattr(f, k)]
    return out


def test_registry_keeps_todays_names_and_order():
    from normvar_core.pipeline.accumulators import REGISTRY

    assert [c.name for c in REGISTRY] == NAMES
    orders = [m.order for m in all_measures()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    for cls in REGISTRY:  # the class's contract attributes are its declaration's
        m = measure(cls.name)
        assert cls.measure is m and cls.table_names == m.tables and cls.uses_results == m.uses
        assert cls.finalize_in_background == m.background
    assert measure("geometry").title == "spectra, TwoNN, seed 004's batches"  # the finalize label, unchanged
    with pytest.raises(KeyError):
        measure("no-such-measure")


@pytest.mark.parametrize("m", all_measures(), ids=lambda m: m.name)
def test_every_reference_resolves_in_its_layer(m):
    for kind, ref in _refs(m):
        module, sep, attr = ref.partition(":")
        assert sep and attr, f"{m.name}.{kind} = {ref!r} is not 'module:attribute'"
        assert module.startswith(REF_LAYERS[kind]), f"{m.name}.{kind} = {ref!r} is outside {REF_LAYERS[kind]}"
        assert callable(resolve(ref)), ref
    if m.accumulator:
        assert resolve(m.accumulator).measure is m
    for other in (m.follows, *m.uses):
        if other:
            assert measure(other).order < m.order, f"{m.name} needs {other}, which finishes after it"


def test_tables_are_unique_and_required_ones_declared():
    from normvar_core.runs.tables import MEASURE_TABLES, REQUIRED_TABLES

    tables = [t for m in all_measures() for t in m.tables]
    assert len(tables) == len(set(tables)), sorted(t for t in tables if tables.count(t) > 1)
    for m in all_measures():
        assert set(m.required) <= set(m.tables) and (m.legacy_marker is None or m.legacy_marker in m.tables)
    assert REQUIRED_TABLES == {"moments": ("token_stats", "token_means", "layer_stats", "frequency_hist"),
                               "samples": ("samples",)}
    assert MEASURE_TABLES["geometry"] == ("layer_geometry", "layer_spectrum", "pair_cosines")


def test_runconfig_keeps_every_option_in_order():
    assert list(RunConfig().to_dict()) == OPTIONS
    switches = [s for m in all_measures() for s in ((m.switch,) if m.switch else ()) + m.options]
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    for s in switches:
        f = fields[s.field]
        assert f.default == s.default and field_kind(f) is s.type
        assert {k: f.metadata[k] for k in ("help", "flag", "choices", "minimum", "maximum", "label", "section")} == \
               dict(help=s.help, flag=s.flag, choices=s.choices, minimum=s.minimum, maximum=s.maximum, label=s.label,
                    section=s.section)


def _other_value(s):
    """A valid value of switch ``s`` other than its default, as a CLI argument list and as the parsed value."""
    if s.type is bool:
        return [s.flag or "--" + s.field.replace("_", "-")], not s.default
    if s.choices:
        value = next(c for c in s.choices if c != s.default)
    else:
        value = s.type(s.default) + 1 if s.maximum is None or s.default + 1 <= s.maximum else s.type(s.default) - 1
    return [s.flag or "--" + s.field.replace("_", "-"), str(value)], value


@pytest.mark.parametrize("s", [s for m in all_measures() for s in ((m.switch,) if m.switch else ()) + m.options],
                         ids=lambda s: s.field)
def test_every_switch_round_trips_through_the_cli_and_the_form(s):
    from views._form import SPECIAL, config_fields

    parser = argparse.ArgumentParser()
    RunConfig.add_arguments(parser)
    argv, value = _other_value(s)
    cfg = RunConfig.from_args(parser.parse_args(argv))
    assert getattr(cfg, s.field) == value and RunConfig.from_dict(cfg.to_dict()) == cfg
    assert getattr(RunConfig.from_args(parser.parse_args([])), s.field) == s.default
    assert s.field in SPECIAL or s.field in [f.name for f in config_fields(s.section)]
    m = next(m for m in all_measures() if s is m.switch or s in m.options)
    if s is m.switch:  # the switch's off value is what ``asked`` reads
        assert m.asked(RunConfig(**{s.field: s.default})) == (s.default != s.off)
        assert not m.asked(RunConfig(**{s.field: s.off}))


def test_followers_and_droppers_read_their_switch():
    cfg = RunConfig(geometry=False)
    assert not measure("outliers").asked(cfg) and measure("outliers").asked(RunConfig())
    assert measure("moments").asked(cfg) and not measure("moments").may_drop(RunConfig())
    assert measure("selfsim").may_drop(RunConfig()) and not measure("selfsim").may_drop(RunConfig(self_similarity="on"))


def test_an_old_format_run_file_still_reads(written_run_path, tmp_path):  # noqa: F811 - the fixture
    """A file written before the ``accumulators`` column: the measures it holds come from the declared legacy
    markers, and the declared required tables are checked (a missing one names the damage)."""
    from normvar_core.runs.reader import open_run

    old = tmp_path / "old.duckdb"
    shutil.copy(written_run_path, old)
    con = duckdb.connect(str(old))
    con.execute("UPDATE run SET accumulators = NULL")
    con.execute("CHECKPOINT")
    con.close()
    run = open_run(old)
    assert run.accumulators == ["moments", "samples"]
    assert run.has("samples") and run.stats().num_types == run.meta["n_types"]

    con = duckdb.connect(str(old))
    con.execute('DROP TABLE "token_means"')
    con.execute("CHECKPOINT")
    con.close()
    with pytest.raises(NormvarError, match="missing table.*token_means"):
        open_run(old)


def test_only_the_occurrences_declare_a_pre_pass_hook():
    """The Ray driver computes the occurrences' early axes on its first actor and ships them to the others by
    name (``execute/ray_model.ActorModel.prime``, ``ray_shard``); a second measure with a ``prime`` hook would
    run locally but not be shipped on Ray, so declaring one must come with a ``RunContext.primed`` hand-over."""
    hooks = [m.name for m in all_measures() if m.prime]
    assert hooks == ["occurrences"]
