"""Findings: each claim of seeds 002, 003 and 004 tested on the run(s), with its number, interval and
verdict (``stats.findings`` — the same function as ``normvar findings`` and the deck's first slide)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from normvar_core.stats import findings as F
from views import _chrome, _data, _state

run, _ = _chrome.run_page(
    "Findings: does each claim hold on this run?",
    "Each claim of the three studies in one line, tested on the run: its number, a 95 % interval "
    "(bootstrap over token types for the trade-off; split halves of the corpus for the corpus-level "
    "quantities and the geometry) and a verdict — holds, fails, cannot tell (the interval straddles the "
    "threshold) or untestable on this run (with why).",
)
chosen, _ = _state.runs_to_overlay("Runs side by side", "w_find_runs", "w_find_relative", False)

try:
    per_run = {name: _data.findings(r) for name, r in _data.opened_runs(chosen).items()}
except Exception as err:
    _chrome.show_error(err)
    st.stop()

table = pd.DataFrame(
    {
        "claim": [c.wording for c in F.CLAIMS],
        "id": list(F.CLAIM_IDS),
        "seed": [c.seed for c in F.CLAIMS],
        **{name: [F.cell(f) for f in fs] for name, fs in per_run.items()},
    }
)
SEED_HELP = (
    "the study a claim tests: 002 the trade-off of Q = M + V, 003 its Gaussian null, 004 the layer "
    "geometry; ENV the outlier check normvar adds (position 0's share), from none of the three"
)
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    key="findings_table",
    column_config={"seed": st.column_config.TextColumn("seed", help=SEED_HELP)},
)
st.caption(f"Seed: {SEED_HELP}.")
if note := F.samples_note(per_run):
    st.warning(note)
tidy = F.findings_table(per_run)
st.download_button(
    "Download findings (CSV)",
    tidy.to_csv(index=False).encode(),
    file_name=f"{run.name}_findings.csv",
    mime="text/csv",
    key="findings_csv",
)
for name, fs in per_run.items():
    with st.expander(f"Why — {name}", expanded=len(per_run) == 1):
        for f in fs:
            st.markdown(f"**{f.id}** ({f.seed}) — {f.claim}: **{f.verdict}**  \n{f.why}")
if not run.has("halves"):
    st.caption("This run has no split halves: the corpus-level claims have no interval (recompute it to add them).")
_state.sync_url("findings")
