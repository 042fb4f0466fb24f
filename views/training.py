"""Training: a sweep over a model's checkpoints (normvar sweep) — seed 004's Fig. 2 (intrinsic dimension
averaged over layers against step) and Fig. 3/4 (anisotropy per layer per checkpoint), and the study's
measures against training step."""

from __future__ import annotations

import streamlit as st

from normvar_core.viz import training_figures as TF
from views import _access, _chrome, _data, _state

_chrome.page_header(
    "Training dynamics",
    "One run per checkpoint (`normvar sweep --checkpoints DIR`): how anisotropy, "
    "intrinsic dimension and the M–V trade-off develop as the model trains (Razzhigaev et al. 2024 protocol, §4).",
)
v = _state.view()
runs = _data.runs_table()
sweeps = sorted(s for s in runs["sweep"].dropna().unique()) if "sweep" in runs else []
if not sweeps:
    st.info(
        "No sweep yet. Queue one here — one run per checkpoint of a trainer's checkpoint-<step>/ folders, or of "
        "a hub model's revisions — or with `normvar sweep --checkpoints DIR` "
        "(`examples/train_tiny_pythia.py` makes a real series offline); the worker computes them.",
        icon=":material/info:",
    )
    if not _access.read_only() and st.button(
        "Set up a sweep on New run", key="w_training_sweep", type="primary", icon=":material/timeline:"
    ):
        st.session_state["_new_run_mode"] = "sweep"  # New run opens in its sweep mode
        st.switch_page("views/new_run.py")
    st.stop()
current = runs.loc[runs["name"] == v.run, "sweep"]
default = current.iloc[0] if len(current) and current.iloc[0] in sweeps else sweeps[0]
_state.bind("w_sweep", default, lambda x: x in sweeps)
sweep = st.selectbox("Sweep", sweeps, key="w_sweep")
members = [_data.open_run(n) for n in runs.loc[runs["sweep"] == sweep, "name"]]
members = sorted([r for r in members if r is not None], key=lambda r: r.meta.get("step") or 0)
try:
    m = TF.sweep_measures(members)
    figs = [(TF.measures_figure(m, presentation=v.presentation), "training_measures", m)]
    if "twonn_id" in m:
        figs.insert(0, (TF.id_figure(m, presentation=v.presentation), "training_id", m))
        figs.insert(1, (TF.anisotropy_by_step(members, presentation=v.presentation), "training_anisotropy", None))
except Exception as err:
    _chrome.show_error(err)
    st.stop()
for fig, key, data in figs:
    _chrome.chart(fig, key=key, data=data, name=f"{sweep}_{key}")
steps = m["step"].tolist()
_state.bind("w_sweep_step", steps[-1], lambda x: x in steps)
step = st.select_slider("Checkpoint", steps, key="w_sweep_step")
name = m.loc[m["step"] == step, "run"].iloc[0]
if st.button(f"Open step {step} ({name}) in the other pages", key="w_sweep_open"):
    v.run = name
    st.session_state.pop("w_run", None)
    st.switch_page("views/layers.py")
st.dataframe(m, hide_index=True, width="stretch", key="training_table")
_state.sync_url("training")
