"""App. J — word-level sets (eq. 33): x_w = the mean of a word's token embeddings at each occurrence,
words from the fast tokenizer's word ids, keyed by their text. The pipeline's word run against a float64
brute force that runs the real MiniLM sentence by sentence and pools the hidden states by word id."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normvar_core.config import RunConfig
from normvar_core.errors import NormvarError
from normvar_core.pipeline import encoding as E
from normvar_core.pipeline.execute.local import compute_run
from normvar_core.runs.reader import open_run

SENTENCES = [
    "The unbelievably tired fisherman rowed home.",
    "She said nothing, and he said nothing either.",
    "Unhappiness is a word with many pieces.",
    "The the the: very very repetitive words.",
    "A hippopotamus swam past the boathouse.",
    "He looked at the sea for a long while.",
] * 4 + ["Antidisestablishmentarianism " * 30]  # the last one is truncated mid-word at --max-length 48


@pytest.fixture(scope="module")
def word_run(tmp_path_factory, minilm_path):
    root = tmp_path_factory.mktemp("words")
    corpus = root / "c.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    cfg = RunConfig(
        model="minilm",
        corpus=str(corpus),
        unit="word",
        max_length=48,
        geometry=False,
        samples_per_token=2,
        name="w",
        max_words=1000,
        batch_size=5,
    )
    return open_run(compute_run(cfg, root))


def _brute_force(minilm_path, max_length=48):
    import transformers as T

    tok = T.AutoTokenizer.from_pretrained(minilm_path)
    model = T.AutoModel.from_pretrained(minilm_path).eval()
    measure: dict[str, list] = {}
    for s in SENTENCES:
        enc = tok(s, return_offsets_mapping=True, truncation=True, max_length=max_length)
        full = tok(s)
        with torch.no_grad():
            hs = model(input_ids=torch.tensor([enc["input_ids"]]), output_hidden_states=True).hidden_states
        H = torch.stack(hs)[:, 0].double().numpy()  # (L, T, d)
        wids = enc.word_ids()
        n_full = {w: full.word_ids().count(w) for w in set(full.word_ids()) if w is not None}
        for w in sorted({w for w in wids if w is not None}):
            pos = [i for i, x in enumerate(wids) if x == w]
            if len(pos) < n_full[w]:  # cut by the truncation: dropped
                continue
            a, b = enc["offset_mapping"][pos[0]][0], enc["offset_mapping"][pos[-1]][1]
            measure.setdefault(s[a:b], []).append((H[:, pos].mean(1), len(pos)))
    return measure


def test_word_run_equals_brute_force(word_run, minilm_path):
    run = word_run
    assert run.meta["unit"] == "word"
    want = _brute_force(minilm_path)
    toks = run.tokens()
    assert sorted(toks["token"]) == sorted(want)  # the same word types, keyed by text
    assert "Antidisestablishmentarianism" in want and (toks["token"] == "the").sum() == 1
    st = run.stats()
    units = run.table("word_units").set_index("token_id")["n_subtokens"]
    for row in toks.itertuples():
        xs = np.stack([x for x, _ in want[row.token]])  # (n_w, L, d)
        assert row.n == len(xs)
        mu = xs.mean(0)
        q = (xs**2).sum(-1).mean(0)
        k = int(np.searchsorted(st.token_ids, row.token_id))
        np.testing.assert_allclose(st.mean[:, k], mu, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(st.q[:, k], q, rtol=1e-5)
        np.testing.assert_allclose(st.m[:, k], (mu**2).sum(-1), rtol=1e-4)
        np.testing.assert_allclose(st.v[:, k], q - (mu**2).sum(-1), rtol=1e-3, atol=1e-4)
        assert units[row.token_id] == pytest.approx(np.mean([t for _, t in want[row.token]]))
    assert units.max() > 1  # multi-token words exist and are pooled


def test_word_samples_carry_the_whole_word(word_run):
    run = word_run
    layer = run.layers[-1]
    smp = run.samples(layer)
    assert len(smp)
    sents = run.sentences(smp["sentence_id"].tolist())
    spans = [sents[s][a:b] for s, a, b in zip(smp["sentence_id"], smp["char_start"], smp["char_end"])]
    assert spans == smp["token"].tolist()  # the highlighted span is the word itself


def test_word_unit_refuses_a_slow_tokenizer():
    class Slow:
        is_fast = False
        bos_token_id = eos_token_id = None

        def __call__(self, text, **kw):
            return {"input_ids": [[1]] if isinstance(text, list) else [1], "special_tokens_mask": [[0]]}

    with pytest.raises(NormvarError, match="fast tokenizer"):
        E.encode_sentences(["a b"], Slow(), max_length=8, unit="word")


def test_pages_colour_words_by_their_number_of_tokens(word_run, monkeypatch):
    """Trade-off and Token clouds of a word run colour each word by |T_w| (App. J, Fig. 22)."""
    from dashboard_run import APP, arr, cloud_traces, figure, trace
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("NORMVAR_DATA", str(word_run.path.parent.parent))
    units = word_run.table("word_units").set_index("token_id")["n_subtokens"]
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update({"run": "w", "band": "0,5"})
    at.run()
    at.switch_page("views/tradeoff.py").run()
    assert not at.exception and at.toggle(key="w_word_colour").value is True
    fig = figure(at, "token types with")
    pts = trace(fig, "token types")
    toks = word_run.tokens().set_index("token")
    want = [units[toks.loc[t, "token_id"]] for t in pts["text"]]
    np.testing.assert_allclose(arr(pts["marker"]["color"]), want)
    assert "T<sub>w</sub>" in pts["marker"]["colorbar"]["title"]["text"]
    at.switch_page("views/clouds.py").run()
    assert not at.exception
    for emb in cloud_traces(figure(at, "sampled embeddings")):
        np.testing.assert_allclose(arr(emb["marker"]["color"]), [units[toks.loc[t, "token_id"]] for t in emb["text"]])
