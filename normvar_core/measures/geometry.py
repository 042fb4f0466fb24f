"""The layer geometry (seed 004 §2.3–2.4): the exact covariance spectrum, anisotropy, mean cosine and
TwoNN of every kept layer, from one pass over every counted embedding and a seeded uniform sample."""
from normvar_core.measure import Claim, Figure, Measure

MEASURE = Measure(
    name="geometry",
    order=30,
    title="spectra, TwoNN, seed 004's batches",
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
