"""The PCA samples: raw embeddings of the sampled token types (Fig. 1, App. A) for the clouds and the
token explorer, picked before the pass (``plan.samples``) and copied out of the one main pass."""
from normvar_core.constants import MAX_SAMPLES_PER_TOKEN, SAMPLES_PER_TOKEN
from normvar_core.measure import Figure, Measure, Memory, Switch

MEASURE = Measure(
    name="samples", order=20, title="samples",
    accumulator="normvar_core.pipeline.accumulators.samples:SampleAccumulator", tables=("samples",),
    required=("samples",), legacy_marker="samples",
    switch=Switch("samples_per_token", int, SAMPLES_PER_TOKEN,
        help="raw embeddings kept per (layer, sampled token) for the PCA clouds and the token explorer; 0 = none",
        off=0, minimum=0, maximum=MAX_SAMPLES_PER_TOKEN, after="mean_dtype",
    ),
    memory=Memory(
        reason="kept whenever asked for (--samples-per-token 0 leaves it out)",
        terms=("vectors 4·L·P·d", "filled flags P"),
    ),
    plans=("samples",),
    figures=(
        Figure("cloud", "normvar_core.viz.cloud_figures:clouds_figure", page="clouds", section="Cloud (Fig. 1, App. A)",
               tables=("samples",), slide="normvar_core.report.slides:clouds_slide"),
    ),
)
