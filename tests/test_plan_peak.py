"""The memory plan is an upper bound of the real peak where the states dominate, and a tight one: a random Llama
decoder (d = 512, 8 layers, an MLP 128 wide; its state over ten times its weights) run by ``normvar compute`` in its
own process; its peak RSS (``VmHWM``) lies between 70 % and 100 % of ``normvar plan``'s total with the same options
(80 % until the TwoNN arrival stopped copying and hashing every layer of its rows at once: the peak fell by about
150 MB, 0.74–0.77 of the plan). The TwoNN sample is full (16,384 positions a layer: 500 sentences hold about 20,000
tokens), so the state has its size at 20,000 sentences too; the states and the weights both grow with the layers, so
8 keep their ratio (``benchmarks/bench_plan_peak.py`` runs the d = 1,024 shapes and others)."""

import pytest
from model_dirs import build_decoder
from peak_rss import corpus_of, plan_and_peak

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def test_the_plan_bounds_the_peak_where_the_states_dominate(tmp_path):
    model = build_decoder(tmp_path, dim=512, layers=8, intermediate=128)
    r = plan_and_peak(model, corpus_of(tmp_path / "c.txt", 500), tmp_path / "data", "--batch-size", "32")
    plan = r["plan"]
    state = sum(b for k, b in plan["measures"].items() if k not in plan["dropped"])
    assert not plan["dropped"] and state > 10 * plan["weights_bytes"]  # the states dominate
    assert plan["id_sample"] == 16384
    assert 0.7 * plan["total_bytes"] <= r["peak"] <= plan["total_bytes"], (r["peak"] >> 20, plan["total_bytes"] >> 20)
