"""IsoScore (Rudman, Gillman, Rayne & Eickhoff 2022): how uniformly a layer's embeddings use the dimensions of
their space, per layer, from the eigenvalues of the exact covariance that the layer geometry already holds
(``stats.isoscore``). No state and no switch of its own: it is on whenever the geometry is (``follows``), a
column ``isoscore`` of ``layer_geometry`` (so a Gaussian null run gets it too) and of ``halves_layer`` (its
split-half interval), a row of the findings, a section of the Geometry page and a slide of the deck."""
from normvar_core.measure import Claim, Figure, Measure

MEASURE = Measure(
    name="isoscore", order=35, title="IsoScore", follows="geometry",
    spectral=(("isoscore", "normvar_core.stats.isoscore:isoscore"),),
    split_half=("isoscore",),
    claims=(
        Claim("isoscore_low", "004", "embeddings use their space unevenly: IsoScore ι < 0.5 in every layer past the "
                                     "embeddings (Rudman et al. 2022)",
              rule="normvar_core.stats.isoscore:isoscore_low"),
    ),
    figures=(
        Figure("isoscore", "normvar_core.viz.isoscore_figures:isoscore_figure", page="geometry",
               section="IsoScore per layer", tables=("layer_geometry",),
               slide="normvar_core.report.slides:figure_slide"),
    ),
)
