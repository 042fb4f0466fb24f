"""``formulas``: the bytes of each measure by the "Memory formulas" table of docs/scale.md, from a plan's
shape, for the tests that check ``normvar plan`` against it."""
from __future__ import annotations

from normvar_core.constants import OCCURRENCE_AXES, OCCURRENCES


def formulas(p: dict, *, mean_bytes: int = 8, top_k: int = 20) -> dict:
    """The "Memory formulas" table of docs/scale.md, from the plan's L, T, d, P, K."""
    L, T, d, P, K = len(p["layers"]), p["types"], p["dim"], p["sample_positions"], p["id_sample"]
    return {"moments": L * T * d * mean_bytes + 8 * L * T + 16 * T + 8 * L + 8,
            "samples": 4 * L * P * d + P,
            "geometry": L * (8 * d * d + K * (4 * d + 41) + 16 * d + 24) + K + 8,
            "selfsim": 8 * L * T * d + 8 * T,
            "outliers": 24 * L * d + 16 * L + 40 * L * top_k + 8,
            "halves": 2 * (L * T * d * mean_bytes + 8 * L * T + 16 * T + 8 * L + 8 + 8 * L * (d * d + d) + 16 * L + 8),
            "occurrences": occurrence_bytes(L, d, min(OCCURRENCES, p["embeddings"]))}


def occurrence_bytes(L: int, d: int, n: int, k: int = OCCURRENCE_AXES) -> int:
    """The Occurrences' state: n kept positions x k float32 projections per layer, their flags, the early axes
    and mean, the sums of the projections and of their outer products."""
    return 4 * L * n * k + n + 8 * L * (d * k + d + k + k * k) + 8
