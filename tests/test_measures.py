"""The measure classes (``normvar_core/pipeline/measures/``) against what the rest of the code derives from
them, for whatever ``MEASURES`` holds: each name once, a measure's used results finish before it, its tables are
declared in ``runs/schema.py`` (once, by one measure) and written by a real run, every RunConfig option
round-trips through the CLI and appears in the New-run form, each measure switch is what ``asked`` reads, a run
short of memory drops the droppable measures in registry order, and a run file older than the ``accumulators``
column still reads, with the required tables checked. The only lists kept here are what files already written
hold: their ``accumulators`` values and their options."""

from __future__ import annotations

import argparse
import dataclasses
import shutil

import duckdb
import pytest
from every_measure import every_measure_on

from normvar_core.config import RunConfig, field_kind
from normvar_core.errors import NormvarError
from normvar_core.pipeline.measures import MEASURES
from normvar_core.runs.declared import required_tables
from normvar_core.runs.schema import LEGACY_MARKERS, MEASURE_TABLES, REQUIRED_TABLES

# the run row's ``accumulators`` values of files already written: each still names a registered measure
WRITTEN_NAMES = ["moments", "samples", "geometry", "selfsim", "outliers", "halves", "occurrences"]

# the options (RunConfig().to_dict() keys) of files already written, in field order (= CLI --help order and
# New-run form order): each still a field, in this order (new options may come anywhere)
WRITTEN_OPTIONS = [
    "model",
    "corpus",
    "name",
    "revision",
    "stack",
    "gguf_file",
    "trust_remote_code",
    "dataset",
    "dataset_config",
    "split",
    "dataset_revision",
    "text_column",
    "split_sentences",
    "max_words",
    "sample_frac",
    "seed",
    "max_sentences",
    "exclude_special",
    "exclude_position0",
    "allow_unknown",
    "max_length",
    "batch_size",
    "device",
    "dtype",
    "layers",
    "mean_dtype",
    "samples_per_token",
    "geometry",
    "halves",
    "id_sample",
    "occurrences",
    "self_similarity",
    "memory_gb",
    "scatter_dtype",
    "executor",
    "ray_address",
    "workers",
    "device_map",
    "max_memory",
    "offload_folder",
    "gpus_per_worker",
    "unit",
    "sweep",
    "step",
]

NAMES = [c.name for c in MEASURES]
FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}


def _values(f) -> list:
    """Values of RunConfig field ``f`` other than its default that a measure switch may take (none for a field
    without a default to vary)."""
    kind, meta = field_kind(f), f.metadata
    if kind is bool:
        return [not f.default]
    if meta["choices"]:
        return [c for c in meta["choices"] if c != f.default]
    if kind in (int, float) and f.default is not None:
        return [v for v in (0, f.default + 1) if v != f.default and (meta["minimum"] is None or v >= meta["minimum"])]
    return []


# every (option, value, measure) where setting the option to the value changes whether the run asks for the measure
SWITCHES = [
    (name, v, cls)
    for name, f in FIELDS.items()
    for v in _values(f)
    for cls in MEASURES
    if cls.asked(RunConfig(**{name: v})) != cls.asked(RunConfig())
]


def test_each_measure_is_registered_once_with_its_tables_declared():
    assert len(NAMES) == len(set(NAMES)) and set(WRITTEN_NAMES) <= set(NAMES)
    for i, cls in enumerate(MEASURES):  # a measure's used results are finished before it (registry order)
        assert set(cls.uses_results) <= set(NAMES[:i]), cls.name
        assert set(cls.uses_states) <= set(NAMES) - {cls.name}, cls.name
        # the built-in tables, known to the torch-free reader without the file (a measure added later is not
        # there: its run file records its tables, ``runs/declared.py``)
        assert cls.title and cls.policy and cls.table_names == MEASURE_TABLES.get(cls.name, cls.table_names), cls.name
    assert list(MEASURE_TABLES) == [n for n in NAMES if n in MEASURE_TABLES]  # registered, in registry order


def test_tables_are_unique_and_required_ones_declared():
    tables = [t for ts in MEASURE_TABLES.values() for t in ts]
    assert len(tables) == len(set(tables)), sorted(t for t in tables if tables.count(t) > 1)
    for name, required in REQUIRED_TABLES.items():
        assert set(required) <= set(MEASURE_TABLES[name])
    assert all(t in MEASURE_TABLES[name] for t, name in LEGACY_MARKERS.items())


def test_every_measure_writes_its_declared_tables_in_a_real_run(tmp_path, tiny_models, corpus40):
    """A tiny BERT's run with every measure asked for: each is held, named in the run row in registry order,
    and each table it says this run writes (``tables_written``) is in the file and declared for it."""
    from real_state import real_pass

    from normvar_core.pipeline.execute.publish import publish_run
    from normvar_core.runs.reader import open_run

    cfg = every_measure_on(
        model=str(tiny_models["bert"]), corpus=str(corpus40), id_sample=200, memory_gb=1000
    )  # the opt-in measures too
    setup, measures = real_pass(cfg, tmp_path / "data")
    written = {n: m.tables_written(setup.ctx) for n, m in measures.items()}
    path = publish_run(
        tmp_path / "r.duckdb",
        plan=setup.plan,
        source=setup.source,
        ctx=setup.ctx,
        measures=measures,
        seconds=0.0,
        notes={},
    )
    run = open_run(path)
    assert run.meta["accumulators"] == [c.name for c in MEASURES if c.asked(cfg)] == list(measures)
    for name, tables in written.items():
        declared = MEASURE_TABLES.get(name, required_tables(run.meta, name))
        assert tables and set(tables) <= set(declared) and set(REQUIRED_TABLES.get(name, ())) <= set(tables)
        assert all(run.has(t) for t in tables), (name, [t for t in tables if not run.has(t)])


def test_runconfig_keeps_every_written_option_in_order():
    options = list(RunConfig().to_dict())
    assert [o for o in options if o in WRITTEN_OPTIONS] == WRITTEN_OPTIONS
    for f in FIELDS.values():  # a switch on by default is turned off by --no-<name>
        if field_kind(f) is bool and f.default is True:
            assert f.metadata["flag"] == "--no-" + f.name.replace("_", "-"), f.name


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


@pytest.mark.parametrize("name", sorted({n for n, _, _ in SWITCHES}))
def test_every_switch_round_trips_through_the_cli_and_the_form(name):
    """Every measure switch (``SWITCHES``, found from ``asked``): its CLI flag parses to the value, the config
    round-trips through its dict, and the New-run form shows it."""
    from views._form import SPECIAL, config_fields

    f = FIELDS[name]
    parser = argparse.ArgumentParser()
    RunConfig.add_arguments(parser)
    argv, value = _other_value(f)
    cfg = RunConfig.from_args(parser.parse_args(argv))
    assert getattr(cfg, name) == value and RunConfig.from_dict(cfg.to_dict()) == cfg
    assert getattr(RunConfig.from_args(parser.parse_args([])), name) == f.default
    assert name in SPECIAL or name in [g.name for g in config_fields(f.metadata["section"])]


def test_every_switch_is_what_asked_reads():
    """Each measure a switch turns off is asked for by default, and only the switch's own value turns it off; a
    measure off by default (opt-in) is turned on by one switch of its own, a flag that defaults off; a measure the
    default run may drop but a switch forces on names the option that leaves it out (``fix``)."""
    assert SWITCHES, "no measure reads a switch"
    for name, value, cls in SWITCHES:
        if cls.asked(RunConfig()):
            assert not cls.asked(RunConfig(**{name: value})), (name, value, cls.name)
        else:
            on = [(n, v) for n, v, c in SWITCHES if c is cls]
            assert on == [(name, True)] and FIELDS[name].default is False, (cls.name, on)
    for name, f in FIELDS.items():
        for value in _values(f):
            for cls in MEASURES:
                cfg = RunConfig(**{name: value})
                if cls.may_drop(RunConfig()) and cls.asked(cfg) and not cls.may_drop(cfg):
                    assert cls.fix, (cls.name, name, value)  # forced on: the fix leaves it out


def test_a_run_short_of_memory_drops_in_registry_order():
    """With room for the fixed part and the first k droppable measures (registry order), the plan keeps those and
    drops the rest, whatever the registry holds."""
    import torch

    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.memory.plan import plan_memory
    from normvar_core.pipeline.memory.terms import loop_parts, loop_total
    from normvar_core.pipeline.model_shape import ModelShape
    from normvar_core.pipeline.run_plan import synthetic_plan

    cfg = every_measure_on(model="gaussian", samples_per_token=2, id_sample=50)  # every measure asked
    plan = synthetic_plan(cfg, n_sentences=60, vocab_size=30, layers=[0, 1, 2], batch_size=8)
    ctx = RunContext(cfg=cfg, layers=[0, 1, 2], dim=16, device=torch.device("cpu"), plan=plan, tokens=plan.tokens)
    shape = ModelShape(
        name="toy",
        architecture="Toy",
        params=1000,
        lm_head_params=0,
        buffer_bytes=0,
        dim=16,
        num_hidden_states=3,
        heads=1,
        ffn=32,
        vocab=30,
        max_length=32,
    )
    kw = dict(shape=shape, device="cuda", dtype="float32")  # the device's figures only (no host terms)
    roomy = plan_memory(ctx, memory_bytes=1 << 40, **kw)
    droppable = [c.name for c in MEASURES if c.droppable(ctx) and c.name in roomy.measures]
    assert not roomy.dropped and droppable == [c.name for c in MEASURES if c.may_drop(cfg)]
    # on a GPU: weights + the pass and the measures' update of its batch (pass + loop) + the states; a dropped
    # measure takes its state and its part of the loop term with it
    parts = loop_parts(ctx, MEASURES)
    fixed = roomy.total_bytes - sum(roomy.measures[n] for n in droppable) - loop_total(parts)
    for k in range(len(droppable) + 1):
        budget = fixed + sum(roomy.measures[n] for n in droppable[:k]) + loop_total(parts, droppable[k:])
        mp = plan_memory(ctx, memory_bytes=budget, **kw)
        assert mp.fits and mp.dropped == droppable[k:], (k, mp.dropped)
        assert mp.total_bytes == budget
        assert all(n in mp.reasons for n in mp.dropped)


def test_an_old_format_run_file_still_reads(written_run_path, tmp_path):
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
    assert run.measures == [n for n in NAMES if n in LEGACY_MARKERS.values()]
    assert run.has("samples") and run.stats().num_types == run.meta["n_types"]

    con = duckdb.connect(str(old))
    con.execute('DROP TABLE "token_means"')
    con.execute("CHECKPOINT")
    con.close()
    with pytest.raises(NormvarError, match="missing table.*token_means"):
        open_run(old)


def test_the_architecture_and_the_manual_list_the_registry_in_order():
    """ARCHITECTURE.md's measure names (the one-class sentence, the "Measures today" list, one line each) and
    docs/measures.md's ``MEASURES`` tuple are the registry's, in its order; the drop order it states is the
    droppable measures of a default run in registry order (``plan_memory`` keeps each that still fits, in that
    order)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    arch = (root / "ARCHITECTURE.md").read_text()
    names = [c.name for c in MEASURES]

    def ticked(text: str) -> list[str]:
        return re.findall(r"`(\w+)`", text)

    sentence = arch[arch.index("Every streamed measure (") : arch.index(": their `name`s")]
    assert ticked(sentence) == names
    listed = arch[arch.index("Measures today, in registry order") : arch.index("The Gaussian null (`stats/null.py`)")]
    assert re.findall(r"^- `(\w+)`:", listed, re.M) == names
    flat = " ".join(arch.split())
    drop = flat[flat.index("droppable measures in `MEASURES` order (") : flat.index(" in a default run")]
    assert ticked(drop.split("order (", 1)[1]) == [c.name for c in MEASURES if c.may_drop(RunConfig())]
    manual = (root / "docs" / "measures.md").read_text()
    block = manual[manual.index("MEASURES = (") : manual.index(")\n```")]
    assert re.findall(r"^    (\w+),$", block, re.M) == [c.__name__ for c in MEASURES]


def test_the_manual_lists_at_most_ten_ideas_for_a_per_sentence_measure():
    """docs/measures.md's list of what a newcomer learns to write a per-sentence measure: at most ten ideas, each
    naming a real name of the contract."""
    import re
    from pathlib import Path

    from normvar_core.pipeline.contracts import StateBatch
    from normvar_core.pipeline.measures.layerview import LayerMajor, LayerView

    text = (Path(__file__).resolve().parent.parent / "docs" / "measures.md").read_text()
    block = text[text.index("Writing a **per-sentence** measure") :].split("\n\n")[1]
    ideas = re.findall(r"^\d+\. (.+)$", block, re.M)
    assert 1 <= len(ideas) <= 10 and len(ideas) == len(block.splitlines())
    named = {n for idea in ideas for n in re.findall(r"`(?:batch\.)?(\w+)", idea)}
    hooks = {"begin_batch", "update_layer", "end_batch", "planned_state", "result", "tables", "curves", "asked"}
    assert hooks <= named and all(hasattr(LayerMajor, n) for n in hooks)
    assert {"sentence_runs", "LayerView", "_add_state"} <= named and hasattr(StateBatch, "sentence_runs")
    assert hasattr(LayerMajor, "_add_state") and LayerView.__name__ == "LayerView"
