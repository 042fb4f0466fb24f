"""Where a model's normalization sits, detected by running it (``probe.run_probe``), never from its name."""

from __future__ import annotations

from typing import Any

from normvar_core.pipeline.models.probe import Probe, as_function, forward, is_norm, norm_kind, run_probe

NORM_PLACEMENTS = ("post", "pre", "pre+post")


def detect_architecture(model, tokenizer, probe: Probe | None = None) -> dict[str, Any]:
    """Detect norm placement/type, final norm and causality from one probe of the model (``probe``).

    With x_in / x_out the first block's input / output and the norms of that block (in call order):
    - "pre":  some norm's input *is* the block input (``ln_1``/``input_layernorm`` before attention);
    - "post": the block output *is* a norm's output (BERT's ``output.LayerNorm`` after the residual add);
    - "pre+post": pre, plus a norm whose input is a sublayer's output (Gemma's
      ``post_attention_layernorm``/``post_feedforward_layernorm`` before the residual add).
    Norm type: ``probe.norm_kind`` (a LayerNorm centres its input, an RMSNorm does not).
    final_norm: the last hidden state differs from the last block's output (HF applies
    ln_f/norm). is_decoder: changing the last token leaves earlier positions unchanged (causal).
    """
    import torch

    probe = probe or run_probe(model, tokenizer)
    hs = probe.hidden_states
    dim = int(hs[-1].shape[-1])

    def same(a, b) -> bool:
        return a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)

    calls = probe.calls
    norms = [n for n, (m, _, out) in calls.items() if is_norm(m) and out is not None and out.shape[-1] == dim]
    pre = [n for n in norms if same(calls[n][1], probe.block_in)]
    post = [n for n in norms if same(calls[n][2], probe.block_out)]
    sub_outputs = [out for m, _, out in calls.values() if not is_norm(m)]
    sandwich = [n for n in norms if n not in pre and n not in post and any(same(calls[n][1], o) for o in sub_outputs)]
    if pre and (sandwich or post):
        placement = "pre+post"
    elif pre:
        placement = "pre"
    elif post:
        placement = "post"
    else:  # fallback: is a norm the first module called in the block?
        placement = "pre" if calls and next(iter(calls)) in norms else "post"
    ref = pre + post + sandwich + norms
    norm_type = norm_kind(as_function(calls[ref[0]][0]), dim)[0] if ref else "none"
    return {
        "norm_placement": placement,
        "norm_type": norm_type,
        "final_norm": not same(probe.last_block_out, hs[-1]),
        "is_decoder": _is_causal(model, probe),
        "num_hidden_states": len(hs),
        "dim": dim,
        "norm_modules": {"pre": pre, "post": post, "sandwich": sandwich},
    }


def _is_causal(model, probe: Probe) -> bool:
    """Changing the probe's last token leaves the last hidden state of every earlier position unchanged."""
    import torch

    ids = probe.ids
    if ids.shape[1] < 2:
        return False
    ids2 = ids.clone()
    ids2[0, -1] = (ids2[0, -1] + 1) % int(model.get_input_embeddings().num_embeddings)
    hs, hs2 = probe.hidden_states, forward(model, ids2)
    return bool(torch.allclose(hs[-1][0, :-1], hs2[-1][0, :-1], atol=1e-5, rtol=1e-4))


__all__ = ["detect_architecture", "NORM_PLACEMENTS"]
