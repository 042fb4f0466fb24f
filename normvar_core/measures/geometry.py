"""The layer geometry (seed 004 §2.3–2.4): the exact covariance spectrum, anisotropy, mean cosine and
TwoNN of every kept layer, from one pass over every counted embedding and a seeded uniform sample."""
from normvar_core.constants import ID_SAMPLE, MAX_ID_SAMPLE, TWONN_BATCH
from normvar_core.measure import Claim, Figure, Measure, Memory, Switch

MEASURE = Measure(
    name="geometry", order=30, title="spectra, TwoNN, seed 004's batches",
    accumulator="normvar_core.pipeline.accumulators.geometry:GeometryAccumulator",
    tables=("layer_geometry", "layer_spectrum", "pair_cosines"),
    switch=Switch("geometry", bool, True,
        help="layer geometry in the same pass: exact covariance spectrum, anisotropy, mean cosine, TwoNN, outlier "
             "dimensions",
        off=False, flag="--no-geometry", after="samples_per_token",
    ),
    options=(
        Switch("id_sample", int, ID_SAMPLE,
            help="embeddings per layer in the seeded uniform sample for TwoNN and seed 004's batch anisotropy: "
                 "min(N, this), whatever the run's size (seed 004: 16384), in batches of "
                 f"at least {TWONN_BATCH:,}",
            off=0, minimum=0, maximum=MAX_ID_SAMPLE, label="TwoNN sample", after="halves",
        ),
    ),
    background=True,
    memory=Memory(
        droppable=True, reason="a run short of memory keeps its moments and names the layer subset that would fit",
        terms=("scatter 8·L·d²", "sample K·(4·d + 41) per layer", "mean and Σu 16·L·d", "per-layer sums 24·L",
               "filled flags K", "n 8"),
    ),
    plans=("uniform",),
    figures=(
        Figure("profiles", "normvar_core.viz.geometry_figures:geometry_profiles", page="geometry",
               section="Layer geometry (seed 004, Fig. 1)", tables=("layer_geometry",), slide="normvar_core.report.slides:geometry_slide"),
        Figure("spectrum", "normvar_core.viz.geometry_figures:spectra_figure", page="geometry", section="Covariance spectrum",
               tables=("layer_spectrum",)),
    ),
    claims=(
        Claim("anisotropy_profile", "004", "anisotropy is flat across layers in encoders, bell-shaped in decoders (Fig. 1)",
              rule="normvar_core.stats.claims_geometry:anisotropy_profile"),
        Claim("id_profile", "004", "intrinsic dimension (TwoNN) rises then falls across layers",
              rule="normvar_core.stats.claims_geometry:id_profile"),
    ),
    split_half=("anisotropy",),
)
