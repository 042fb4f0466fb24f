"""Runs: the published runs, the job queue with live progress, and one run's full metadata."""

from __future__ import annotations

import re
import time

import pandas as pd
import streamlit as st

from normvar_core.service.job import JobState
from normvar_core.viz.table_words import for_display
from views import _access, _chrome, _data, _state

_chrome.page_header("Runs", "Published runs in the data directory, the worker's job queue, and what each run contains.")
v = _state.view()
runs = _data.runs_table()


RECENT_S = 120  # a finished job's line stays this long (seconds), saying it finished


def _ago(ts: float | None) -> str:
    if not ts:
        return "–"
    s = max(0, time.time() - float(ts))
    return f"{s:.0f} s ago" if s < 90 else (f"{s / 60:.0f} min ago" if s < 5400 else f"{s / 3600:.1f} h ago")


def blank_missing(df: pd.DataFrame) -> pd.DataFrame:
    """A missing text cell shown blank, not as the word "None" (the table draws None in object columns)."""

    def missing(x):
        return x is None or (isinstance(x, float) and x != x)

    return df.assign(**{c: df[c].map(lambda x: "" if missing(x) else x) for c in df.columns if df[c].dtype == object})


def short_corpus(name) -> str | None:
    """A corpus name for the table: an upload recorded by its 64-hex sha256 (runs from before uploads kept
    their file name) shows its first 8 hex digits."""
    if not isinstance(name, str):
        return name
    return f"upload {name[:8]}…" if re.fullmatch(r"[0-9a-f]{64}", name) else name


def dataset_line(d: dict) -> str:
    """Where a --dataset corpus came from: id, configuration, split, revision and its fingerprint or commit."""
    parts = [f"dataset `{d.get('id')}` ({d.get('kind')})"] + [
        f"{k} `{d[k]}`"
        for k in ("config", "split", "revision", "text_column", "commit", "fingerprint", "sha256")
        if d.get(k)
    ]
    return " · ".join(parts)


@st.fragment(run_every=2.0)
def jobs_panel() -> None:
    """The job queue, refreshed every 2 s (only this fragment reruns)."""
    from normvar_core.service import jobs

    try:
        store = jobs.JobStore(_data.data_dir())
        items = store.list(limit=20)
        worker = store.worker()
    except Exception as err:
        _chrome.show_error(err)
        return
    head = st.columns([3, 1])
    head[0].subheader("Jobs")
    if worker is not None:
        head[1].success(f"worker running (pid {worker.pid})", icon=":material/memory:")
    else:
        head[1].warning("no worker running", icon=":material/power_off:")
    if not items:
        st.caption("No jobs yet. Submit one on **New run**, or `normvar submit`.")
        return
    active = [j for j in items if j.state.active]
    for j in active:
        with st.container(border=True):
            c1, c2 = st.columns([3, 2])
            cfg = j.config
            c1.markdown(f"**{j.name}** · `{cfg.get('model')}` · job `{j.id}`")
            p = j.progress or {}
            if j.state == JobState.QUEUED:
                c1.progress(0, text="queued — waiting for the worker")
            else:
                pct = j.percent
                text = jobs.progress_text(p, j.task)
                if j.interrupted:
                    text += " · worker gone: resumes when a worker starts"
                c1.progress(int(pct or 0), text=text)
            if not _access.read_only() and c2.button("Cancel", key=f"cancel_{j.id}", icon=":material/cancel:"):
                store.cancel(j.id)
                st.rerun(scope="fragment")
    for j in (j for j in items if j.state == JobState.DONE and j.finished and time.time() - j.finished < RECENT_S):
        with st.container(border=True):  # a job that just ended keeps its line, at 100 % and saying so
            st.markdown(f"**{j.name}** · job `{j.id}`")
            # a green line, not a full progress bar: the bar takes the theme's red, which reads as a failure
            st.success(
                f"{jobs.progress_text(j.progress, j.task) if j.progress else 'done'} · finished {_ago(j.finished)}",
                icon=":material/check_circle:",
            )
    done = [j for j in items if j.state.final]
    if done:
        table = pd.DataFrame(
            [
                {
                    "run": j.name,
                    "model": j.config.get("model"),
                    "state": j.label,
                    "finished": _ago(j.finished),
                    "message": (j.message or "")[:200],
                    "job": j.id,
                }
                for j in done
            ]
        )
        st.dataframe(blank_missing(table), hide_index=True, width="stretch", key="jobs_table")
        for j in done:  # an unexpected failure keeps its full traceback in queue/logs/<job>.log
            log = store.log_path(j.id)
            if j.state == JobState.FAILED and log.is_file():
                with st.expander(f"Traceback of the failed job {j.name} (`{j.id}`)", icon=":material/bug_report:"):
                    text = log.read_text(errors="replace")[-20000:]
                    st.code(text, language="python")
                    st.download_button(
                        "Download the log",
                        text,
                        file_name=f"normvar-job-{j.id}.log",
                        key=f"log_{j.id}",
                        icon=":material/download:",
                    )
    # a job finished since the last look: refresh the whole app so the run appears everywhere
    n_done = sum(1 for j in items if j.state == JobState.DONE)
    if st.session_state.get("_jobs_done") not in (None, n_done):
        st.session_state["_jobs_done"] = n_done
        st.rerun(scope="app")
    st.session_state["_jobs_done"] = n_done


def dropped_sentences(meta: dict) -> None:
    """The sentences the word limit dropped (the first ones, as the corpus was read), under their count."""
    notes = (meta.get("notes") or {}).get("corpus") or {}
    n, examples = int(notes.get("n_too_long") or 0), notes.get("too_long_examples") or []
    if not n:
        return
    limit = (meta.get("options") or {}).get("max_words")
    with st.expander(
        f"{n:,} sentences dropped by the {limit}-word limit" if limit else f"{n:,} sentences dropped by the word limit",
        icon=":material/content_cut:",
    ):
        if examples:
            st.caption(f"The first {len(examples)} (raise `max_words`, 0 = no limit, to keep them):")
            st.dataframe(pd.DataFrame({"sentence": examples}), hide_index=True, width="stretch", key="too_long_table")
        else:
            st.caption("This run was computed before normvar kept examples of them.")


st.subheader("Published runs")
if runs.empty:
    st.info(
        "No published run yet — `make run` submits the default (MiniLM × the shipped novels); "
        "or start one on **New run**."
    )
else:
    # hidden states = blocks + the input embeddings, as in the run's header below (num_layers counts blocks)
    from normvar_core.viz.overlay import runs_in_order

    runs = runs.set_index("name", drop=False).loc[runs_in_order(runs)].reset_index(drop=True)  # nulls under their run
    show = runs.assign(
        num_layers=runs["num_layers"].map(lambda n: int(n) + 1 if pd.notna(n) else None),
        corpus=runs["corpus"].map(short_corpus),
    )
    show = show.rename(
        columns={
            "n_types": "|T|",
            "n_embeddings": "|X| per layer",
            "num_layers": "hidden states",
            "norm_placement": "norm",
            "created_at": "created",
        }
    )
    st.dataframe(
        blank_missing(show.drop(columns=["path"])),
        hide_index=True,
        width="stretch",
        key="runs_table",
        column_config={
            "|T|": st.column_config.NumberColumn(format="localized"),
            "|X| per layer": st.column_config.NumberColumn(format="localized"),
        },
    )

damaged = _data.damaged_runs()
for _, r in damaged.iterrows():
    st.warning(f"**{r['name']}** is damaged and left out of every page: {r['problem']}", icon=":material/warning:")

jobs_panel()

run = _chrome.current_run()
if run is not None:
    st.subheader(f"Run: {run.name}")
    m = run.meta
    c = st.columns(6)
    c[0].metric(
        "model",
        str(m.get("model")) + (f" · {m['stack']}" if m.get("stack") else ""),
        help="encoder-decoder: the stack this run measures (--stack)" if m.get("stack") else None,
    )
    c[1].metric("|T| token types", _chrome.fmt_int(m.get("n_types")))
    c[2].metric("|X| embeddings / layer", _chrome.fmt_int(m.get("n_embeddings")))
    n_hidden = run.num_hidden_states
    c[3].metric(
        "hidden states",
        f"{n_hidden} × {m.get('dim')} d",
        help="the input embeddings + one per block"
        + ("" if len(run.layers) == n_hidden else f"; {len(run.layers)} of them stored in this run"),
    )
    c[4].metric("norm placement", str(m.get("norm_placement") or "–"))
    c[5].metric("sentences", _chrome.fmt_int(m.get("n_sentences")))
    stack = f" ({m['stack']} stack)" if m.get("stack") else ""
    st.caption(
        f"{m.get('architecture') or ''}{stack} · corpus `{short_corpus(m.get('corpus_name'))}` · "
        f"created {m.get('created_at')} · "
        f"{(m.get('seconds') or 0):.0f} s on {m.get('device') or '?'} · file `{run.path}`"
    )
    if m.get("dataset"):
        st.caption(dataset_line(m["dataset"]))
    if m.get("device_map"):  # --device-map: where each module ran (accelerate's resolved map)
        dmap = m["device_map"]
        where = {d: [k or "(whole model)" for k, v in dmap.items() if v == d] for d in dict.fromkeys(dmap.values())}
        with st.expander(
            "Device map: " + " · ".join(f"{d}: {len(ms)} module{'s' * (len(ms) > 1)}" for d, ms in where.items())
        ):
            st.dataframe(
                pd.DataFrame({"module": list(dmap), "device": list(dmap.values())}),
                hide_index=True,
                width="stretch",
                key="device_map_table",
            )
    _chrome.unknown_token_warning(run)
    dropped_sentences(m)
    from normvar_core.runs.reader import skipped_measures

    for reason in skipped_measures(m).values():  # measures asked for but too big (notes.skipped)
        st.info(reason, icon=":material/info:")
    _chrome.report_button([run], key="w_report_run")
    if not str(m.get("source") or "model").startswith("null:") and not _access.read_only():
        with st.container(horizontal=True):
            kind = st.selectbox(
                "Gaussian null",
                ["isotropic", "offset", "matched"],
                key="w_null_kind",
                help="the Gaussian null (high-dimensional baseline): the same token counts, layers and d drawn from a "
                "Gaussian "
                "(isotropic N(0, Q/d I); offset N(c, V/d I), |c|² = M; matched N(μ_t, V_t/d I))",
            )
            if st.button(
                "Draw the Gaussian null",
                key="w_null_go",
                icon=":material/casino:",
                help="a worker job: the moments are instant, the null's layer geometry takes up to a "
                "minute or two at bert-base scale",
            ):
                from normvar_core.runs.null import null_name
                from normvar_core.service.jobs import JobStore

                try:
                    job = JobStore(_data.data_dir()).submit_null(run.name, kind, 0)
                    st.success(
                        f"Queued job `{job}`: `{null_name(run, kind, 0)}` appears among the runs when the "
                        "worker has drawn it; pick it as the Gaussian null on any page."
                    )
                except Exception as err:
                    _chrome.show_error(err)
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Corpus-level statistics per layer** (all types; eqs. 8–11)")
        st.dataframe(for_display(run.layer_stats()), hide_index=True, width="stretch", key="layer_stats")
    with c2:
        st.markdown("**Full metadata** (the `run` row; `options` reproduces the run)")
        st.json({k: v for k, v in m.items() if v is not None}, expanded=1)  # an unset field is left out, not NULL
_state.sync_url("runs")
