"""The token explorer: every sample of a real MiniLM run points at its sentence and position (checked by
re-tokenizing the stored sentence), its character span covers the token's text, the contexts list
equals a brute force from the stored vectors and means, and `normvar contexts` prints it."""

from __future__ import annotations

import numpy as np
import pytest

from normvar_core.config import RunConfig
from normvar_core.runs.reader import open_run
from normvar_core.service import cli
from normvar_core.stats.analyses import strip_prefix
from normvar_core.stats.contexts import contexts, highlight


@pytest.fixture(scope="module")
def explorer_run(tmp_path_factory, minilm_path):
    from normvar_core.pipeline.execute.local import compute_run

    data = tmp_path_factory.mktemp("explorer")
    path = compute_run(
        RunConfig(model="minilm", max_sentences=150, samples_per_token=30, name="ex", geometry=False), data
    )
    return data, open_run(path)


def test_every_sample_is_at_its_sentence_and_position(explorer_run, minilm_path):
    from transformers import AutoTokenizer

    _, run = explorer_run
    tok = AutoTokenizer.from_pretrained(minilm_path)
    smp = run.samples(run.layers[0])
    sents = run.sentences()
    assert run.has_contexts and len(smp) > 500 and set(smp["sentence_id"]) <= set(sents)
    enc = {s: tok(t, add_special_tokens=True, return_offsets_mapping=True) for s, t in sents.items()}
    for r in smp.itertuples():
        ids = enc[r.sentence_id]["input_ids"]
        assert ids[r.position] == r.token_id, (r.token, r.sentence_id, r.position)
        if r.char_start >= 0:
            piece = sents[r.sentence_id][r.char_start : r.char_end]
            assert piece.lower() == strip_prefix(r.token).lower()
        else:
            assert r.token in tok.all_special_tokens


def test_contexts_equal_a_brute_force(explorer_run):
    _, run = explorer_run
    st = run.stats()
    layer = run.layers[3]
    tid = int(run.sampled_tokens().sort_values("count").iloc[-3]["token_id"])
    smp = run.samples(layer, [tid])
    mu = st.mean[st.layer(layer), int(np.searchsorted(st.token_ids, tid))].astype(np.float64)
    got = contexts(smp, mu, run.sentences())
    X = np.stack(smp["vector"]).astype(np.float64)
    d = np.sqrt(((X - mu) ** 2).sum(1))
    np.testing.assert_allclose(got["distance"].to_numpy(), np.sort(d), rtol=1e-12)
    cos = X @ mu / np.linalg.norm(X, axis=1) / np.linalg.norm(mu)
    np.testing.assert_allclose(np.sort(got["cosine"].to_numpy()), np.sort(cos), rtol=1e-12)
    assert highlight("a cat sat", 2, 5) == "a [[cat]] sat"


def test_contexts_cli(explorer_run, capsys):
    data, run = explorer_run
    assert cli.main(["contexts", "ex", "the", "--k", "2", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("'the' in run ex") and "most typical" in out[2] and "most atypical" in out[6]
    assert all("[[" in line and "]]" in line for line in (out[3], out[4], out[7], out[8]))
    for argv, match in (
        (["contexts", "ex", "zzzzqq"], "no sampled contexts"),
        (["contexts", "ex", "the", "--layer", "99"], "not stored"),
        (["contexts", "nope", "the"], "no run named"),
    ):
        assert cli.main([*argv, "--data-dir", str(data)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and match in err[0]
