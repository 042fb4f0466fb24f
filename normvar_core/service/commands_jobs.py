"""Sub-commands of the background queue: ``worker``, ``submit``, ``jobs``, ``cancel``.

``normvar worker``   long-lived consumer of the data directory's queue (one job at a time);
                     SIGTERM/Ctrl-C stop it at the next batch, keeping the job's checkpoint.
``normvar submit``   the options of ``normvar compute`` (RunConfig) + ``--overwrite``; prints the job id.
``normvar jobs``     table of jobs: id, state, progress, embeddings/s, ETA, name, message.
``normvar cancel``   cancel a queued or running job.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from normvar_core.config import RunConfig
from normvar_core.numbers import MAX_SECONDS, Number
from normvar_core.service.job import ACTIVE, LATE_CANCEL, JobState
from normvar_core.service.job_progress import fmt_eta


def register(sub) -> None:
    from normvar_core.service.args import add_data_dir

    p = sub.add_parser(
        "worker",
        help="run the background worker (computes queued runs)",
        description="Compute queued runs one at a time, until SIGTERM/Ctrl-C.",
    )
    add_data_dir(p)
    p.add_argument("--once", action="store_true", help="exit when the queue is empty")
    p.add_argument(
        "--poll",
        type=Number("--poll", least_open=True, most=MAX_SECONDS),
        default=0.5,
        metavar="S",
        help="seconds between queue polls",
    )
    p.add_argument(
        "--checkpoint-every",
        type=Number("--checkpoint-every", most=MAX_SECONDS),
        default=30.0,
        metavar="S",
        help="seconds between checkpoints of a running job (default 30)",
    )
    p.set_defaults(func=_worker)

    p = sub.add_parser(
        "submit",
        help="queue a run for the worker; prints the job id",
        description="Queue a run (same options as `normvar compute`).",
    )
    RunConfig.add_arguments(p)
    p.add_argument("--overwrite", action="store_true", help="replace a published run of the same name")
    add_data_dir(p)
    p.set_defaults(func=_submit)

    p = sub.add_parser("jobs", help="list queued, running and finished jobs")
    add_data_dir(p)
    p.add_argument("--limit", type=Number("--limit", kind=int), default=20, help="newest N jobs (default 20; 0 = all)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=_jobs)

    p = sub.add_parser("cancel", help="cancel a queued or running job")
    p.add_argument("job_id", help="job id (or a unique prefix), see `normvar jobs`")
    add_data_dir(p)
    p.set_defaults(func=_cancel)


def _worker(args: argparse.Namespace) -> int:
    from normvar_core.service.worker import Worker

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s normvar worker: %(message)s", datefmt="%H:%M:%S"
    )
    w = Worker(args.data_dir, poll_s=args.poll, checkpoint_every_s=args.checkpoint_every).claim()  # before the banner
    print(f"normvar worker: pid {os.getpid()}, data dir {w.dd.root}", file=sys.stderr, flush=True)
    n = w.run(once=args.once)
    print(f"normvar worker: stopped after {n} job(s)", file=sys.stderr, flush=True)
    return 0


def _submit(args: argparse.Namespace) -> int:
    from normvar_core.service.jobs import JobStore

    cfg = RunConfig.from_args(args)
    job_id = JobStore(args.data_dir).submit(cfg, overwrite=args.overwrite)
    print(job_id)
    return 0


def _state_label(job) -> str:
    return job.label


def _jobs(args: argparse.Namespace) -> int:
    from normvar_core.service.jobs import JobStore

    store = JobStore(args.data_dir)
    jobs = store.list(limit=args.limit or None)
    if args.json:
        for j in jobs:
            print(json.dumps(j.to_dict(), sort_keys=True))
        return 0
    if not jobs:
        print(f"no jobs in {store.dd.root}")
        return 0
    rows = [("ID", "STATE", "PROGRESS", "EMB/S", "ETA", "NAME", "MESSAGE")]
    for j in jobs:
        pct = j.percent
        stage = j.stage if j.state == JobState.RUNNING else None
        prog = "" if pct is None else f"{pct:5.1f}%"
        phase = (j.progress or {}).get("phase") if j.state == JobState.RUNNING else None
        if phase or (stage and stage not in ("compute", "embed")):
            prog = f"{prog} {phase or stage}".strip()
        eps = "" if j.emb_per_s is None or j.state != JobState.RUNNING else f"{j.emb_per_s:,.0f}"
        msg = (j.message or "").replace("\n", " ")
        if j.state == JobState.RUNNING and j.interrupted:
            msg = msg or "worker gone; resumes from its checkpoint when a worker starts"
        if len(msg) > 80:
            msg = msg[:77] + "..."
        rows.append((j.id, _state_label(j), prog, eps, fmt_eta(j.eta_s), j.name, msg))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    if any(j.state in tuple(ACTIVE) for j in jobs) and store.worker() is None:
        print("(no worker is running: start one with `normvar worker`)", file=sys.stderr)
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from normvar_core.service.jobs import JobStore

    job = JobStore(args.data_dir).cancel(args.job_id)
    if job.state == JobState.RUNNING and job.publishing:
        print(
            f"{job.id}: the cancel came too late: its run file is being published; the job ends "
            f"{JobState.DONE} ({LATE_CANCEL})"
        )
    elif job.state == JobState.RUNNING:
        print(f"{job.id}: cancelling (stops at the next batch or step of the finalize; nothing is published)")
    elif job.state == JobState.CANCELLED:
        print(f"{job.id}: cancelled")
    else:
        print(f"{job.id}: already {job.label}, nothing to cancel")
    return 0
