"""The exact moments: n_t, μ(X_t), Q/M/V per (layer, token type) (seed 002 §3–4, eqs. 1–6), and the
per-layer sums of eqs. 8–11; a word run (App. J) adds ``word_units``, |T_w| of every word type. Always on: every run holds them, and every other measure builds on its counts."""
from normvar_core.measure import Measure, Memory

MEASURE = Measure(
    name="moments",
    order=10,
    title="moments",
    accumulator="normvar_core.pipeline.accumulators.moments:MomentsAccumulator",
    tables=("token_stats", "token_means", "layer_stats", "frequency_hist", "word_units"),
    required=("token_stats", "token_means", "layer_stats", "frequency_hist"),
    legacy_marker="token_stats",
    memory=Memory(
        droppable=False,
        reason="the study's core: never dropped (--mean-dtype float32 halves its means)",
        terms=("means L·T·d·b_μ", "S_t 8·L·T", "ids and n_t 16·T", "layer index and |X| 8·L + 8"),
    ),
)
