"""The exact moments: n_t, μ(X_t), Q/M/V per (layer, token type) (seed 002 §3–4, eqs. 1–6), and the
per-layer sums of eqs. 8–11; a word run (App. J) adds ``word_units``, |T_w| of every word type. Always on: every run holds them, and every other measure builds on its counts."""
from normvar_core.measure import Figure, Measure, Memory

MEASURE = Measure(
    name="moments", order=10, title="moments",
    accumulator="normvar_core.pipeline.accumulators.moments:MomentsAccumulator",
    tables=("token_stats", "token_means", "layer_stats", "frequency_hist", "word_units"),
    required=("token_stats", "token_means", "layer_stats", "frequency_hist"), legacy_marker="token_stats",
    memory=Memory(
        reason="the study's core: never dropped (--mean-dtype float32 halves its means)",
        terms=("means L·T·d·b_μ", "S_t 8·L·T", "ids and n_t 16·T", "layer index and |X| 8·L + 8"),
    ),
    figures=(
        Figure("tradeoff", "normvar_core.viz.tradeoff_figures:tradeoff_scatter", page="tradeoff", section="Trade-off (Fig. 2)",
               tables=("token_stats",), slide="normvar_core.report.slides:tradeoff_slide"),
        Figure("layers", "normvar_core.viz.tradeoff_figures:layers_figure", page="layers", section="Trade-off across layers (Fig. 4)",
               tables=("token_stats",), slide="normvar_core.report.slides:layers_slide"),
        Figure("shares", "normvar_core.viz.decomposition_figures:decomposition_bars", page="decomposition",
               section="Shares of Q(X) (Fig. 5, 6)", tables=("layer_stats",), slide="normvar_core.report.slides:decomposition_slide"),
        Figure("scatter", "normvar_core.viz.frequency_figures:frequency_scatter", page="frequency",
               section="Q, M, V against log₁₀ nₜ (Fig. 7)", tables=("token_stats",),
               slide="normvar_core.report.slides:frequency_slide"),
        Figure("slopes", "normvar_core.viz.frequency_figures:frequency_slopes", page="frequency",
               section="Slopes per layer (Fig. 17)", tables=("token_stats",)),
        Figure("histograms", "normvar_core.viz.frequency_figures:histograms_figure", page="frequency",
               section="Histograms (Fig. 14–16)", tables=("token_stats",)),
        Figure("corpus", "normvar_core.viz.frequency_figures:corpus_histograms", page="frequency",
               section="The corpus (Fig. 9, 10)", tables=("frequency_hist",)),
    ),
    split_half=("m_over_q", "v_over_q", "v_w_over_q", "v_b_over_q", "v_w_over_v"),
)
