"""MkDocs hook: the tables of the registered measures, generated from ``MEASURES`` at build time so that a new
measure is in the manual without an edit. Two markers:

* ``<!-- normvar-measure-memory -->`` (docs/scale.md): per measure, what its state holds (its ``planned_state``
  docstring, where the formula in symbols is), its arrays largest first (``planned_terms``) and its bytes
  (``planned_bytes``) at two reference shapes: MiniLM's default run (the shipped novels, tokenized as ``compute``
  tokenizes them) and a Llama-2-7B shape (33 hidden states × 4,096) over the same plan;
* ``<!-- normvar-measure-tables -->`` (docs/runfile.md): per measure, its title, when a run holds it (``policy``)
  and the run-file tables it writes (``table_names``, declared in ``runs/schema.py``).
"""

from __future__ import annotations

import inspect
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the checkout's normvar_core, as mkdocstrings' `paths: [.]`
    sys.path.insert(0, str(ROOT))

MEMORY = "<!-- normvar-measure-memory -->"
TABLES = "<!-- normvar-measure-tables -->"
SEVEN_B = (33, 4096)  # Llama-2-7B: hidden states (embeddings + 32 blocks) and width


def _cell(text) -> str:
    text = " ".join(str(text).split()).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


def _gb(n: int | None) -> str:
    return "not declared" if n is None else f"{n / 2**30:,.2f} GB" if n >= 2**27 else f"{n / 2**20:,.1f} MB"


@lru_cache(maxsize=1)
def reference_contexts():
    """{label: RunContext}: MiniLM's default run (its config and tokenizer, no weights) and the 7B shape over the
    same plan (every hidden state kept)."""
    from normvar_core.config import RunConfig
    from normvar_core.pipeline.contracts import RunContext
    from normvar_core.pipeline.corpus.read import load_sentences
    from normvar_core.pipeline.model_shape import config_and_tokenizer, shape_from_config
    from normvar_core.pipeline.run_plan import make_plan

    cfg = RunConfig(model="minilm")
    name, config, tok = config_and_tokenizer(cfg)
    shape = shape_from_config(config, name, tokenizer=tok)
    plan = make_plan(
        cfg,
        load_sentences(cfg),
        tok,
        num_hidden_states=shape.num_hidden_states,
        max_length=shape.max_length,
        device_type="cpu",
    )
    minilm = RunContext(cfg=cfg, layers=plan.layers, dim=shape.dim, device="cpu", plan=plan, tokens=plan.tokens)
    big = RunContext(
        cfg=cfg, layers=list(range(SEVEN_B[0])), dim=SEVEN_B[1], device="cpu", plan=plan, tokens=plan.tokens
    )
    return {
        f"MiniLM default run (L = {minilm.num_layers}, d = {minilm.dim})": minilm,
        f"Llama-2-7B shape (L = {SEVEN_B[0]}, d = {SEVEN_B[1]:,})": big,
    }


def _holds(cls) -> str:
    own = cls.__dict__.get("planned_state")
    doc = inspect.getdoc(own.__func__) if isinstance(own, classmethod) else None
    return doc or "not declared (the memory plan counts nothing for it and says so)"


def memory_markdown(registry=None, contexts=None) -> str:
    from normvar_core.pipeline.measures import MEASURES

    contexts = contexts or reference_contexts()
    first = next(iter(contexts.values()))
    plan = first.plan
    lines = [
        f"Computed from each measure's `planned_state` when this page was built; the reference run keeps "
        f"T = {first.num_types:,} types of {len(plan.sentences):,} sentences, P = {plan.samples.size:,} sampled "
        f"positions, K = {plan.uniform.size if plan.uniform is not None else 0:,} TwoNN positions and "
        f"N = {plan.total_embeddings:,} embeddings. An upper bound where marked (≤).",
        "",
        "| measure | what its state holds | arrays (MiniLM default run) | " + " | ".join(contexts) + " |",
        "|---|---|---|" + "---:|" * len(contexts),
    ]
    for cls in registry or MEASURES:
        bound = "" if cls.planned_exact else "≤ "
        sizes = " | ".join(bound + _gb(cls.planned_bytes(c)) for c in contexts.values())
        terms = "; ".join(f"`{t}`" if not t.startswith("+") else t for t in cls.planned_terms(first))
        lines.append(f"| `{cls.name}` | {_cell(_holds(cls))} | {_cell(terms) or '—'} | {sizes} |")
    return "\n".join(lines) + "\n"


def tables_markdown(registry=None) -> str:
    from normvar_core.pipeline.measures import MEASURES

    lines = ["| measure (`run.accumulators`) | what it is | when a run holds it | tables |", "|---|---|---|---|"]
    for cls in registry or MEASURES:
        tables = ", ".join(f"`{t}`" for t in cls.table_names)
        lines.append(f"| `{cls.name}` | {_cell(cls.title)} | {_cell(cls.policy)} | {tables} |")
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown, **kwargs):
    if MEMORY in markdown:
        markdown = markdown.replace(MEMORY, memory_markdown())
    if TABLES in markdown:
        markdown = markdown.replace(TABLES, tables_markdown())
    return markdown
