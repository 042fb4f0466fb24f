"""The recording-source harness, the one every measure's brute-force test uses: ``Recording`` wraps a run's state
source and keeps, of every batch it hands on, a float64 copy of the counted states and their sentence ids;
``recorded_run`` computes and publishes a real run through it with a registry of measures (``MEASURES``, or
``MEASURES + (YourMeasure,)``), so a test sets the run file's numbers against a float64 brute force over exactly
the embeddings the measures saw."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from normvar_core.config import RunConfig
from normvar_core.pipeline.measures import MEASURES


class Recording:
    """A state source that hands on another's batches and keeps, per batch, a float64 copy of every counted state
    (``states``: (L, N_b, d) each) and the sentence ids and positions of its rows (``sentences``, ``positions``:
    (N_b,) each)."""

    def __init__(self, source):
        self.source, self.states, self.sentences, self.positions = source, [], [], []

    def __getattr__(self, name):
        return getattr(self.source, name)

    def batches(self, plan, start, stop):
        for batch in self.source.batches(plan, start, stop):
            self.states.append(batch.states.double().cpu().numpy().copy())
            self.sentences.append(np.asarray(batch.sentence_ids.cpu()))
            self.positions.append(np.asarray(batch.positions.cpu()))
            yield batch

    def all_states(self) -> np.ndarray:
        """(L, N, d): every counted embedding of the run, in the pass's order."""
        return np.concatenate(self.states, axis=1)

    def all_sentences(self) -> np.ndarray:
        """(N,): the sentence id of each row of ``all_states``."""
        return np.concatenate(self.sentences)

    def all_positions(self) -> np.ndarray:
        """(N,): the position in its sentence of each row of ``all_states``."""
        return np.concatenate(self.positions)


def recorded_run(cfg: RunConfig, root: Path, registry=MEASURES) -> tuple[Path, Recording, dict]:
    """(the published run file, the recording of its pass, {name: measure} it held): ``cfg`` computed in one process
    over the data directory ``root`` with the measures of ``registry``."""
    from normvar_core.pipeline.execute.partials import build_measures, run_range
    from normvar_core.pipeline.execute.prepare import prepare
    from normvar_core.pipeline.execute.publish import publish_run

    (root / "runs").mkdir(parents=True, exist_ok=True)
    setup = prepare(cfg, root)
    source = Recording(setup.source)
    measures = build_measures(setup.ctx, registry=registry)
    run_range(source, setup.plan, measures, 0, setup.plan.n_batches)
    path = publish_run(
        root / "runs" / f"{cfg.name or 'recorded'}.duckdb",
        plan=setup.plan,
        source=setup.source,
        ctx=setup.ctx,
        measures=measures,
        seconds=0.0,
        notes={},
    )
    return path, source, measures
