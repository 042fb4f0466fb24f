"""The PCA samples: raw embeddings of the sampled token types (Fig. 1, App. A) for the clouds and the
token explorer, picked before the pass (``plan.samples``) and copied out of the one main pass."""
from normvar_core.measure import Figure, Measure

MEASURE = Measure(
    name="samples",
    order=20,
    title="samples",
    figures=(
        Figure("clouds", "normvar_core.viz.cloud_figures:clouds_figure", page="clouds", section="Cloud (Fig. 1, App. A)",
               tables=("samples",), slide="normvar_core.report.slides:clouds_slide"),
    ),
)
