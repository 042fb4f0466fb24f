"""Encoder–decoder models (T5, BART, mBART, Pegasus …) and models normvar cannot read (vision, audio).

An encoder–decoder has two stacks of hidden states; a run measures one (``RunConfig.stack``,
recorded in the run row's ``stack`` column):

* ``encoder`` (default): the encoder alone (``model.get_encoder()``), an encoder like BERT — the
  sentence as the tokenizer encodes it, hidden states f_0 … f_L of the encoder;
* ``decoder``: the decoder, teacher-forced as in training: its input is the sentence shifted right
  by the model's ``decoder_start_token_id`` ([start] y_1 … y_n, T5's pad, BART's </s>), the
  encoder reading the sentence itself (y_1 … y_n) for the cross-attention. Each decoder state is
  counted under the token fed at its position (the start token is a special token, as [CLS] is),
  as for a decoder-only model. The prefix is added at tokenization (``encoding.wrap_tokens`` reads
  ``tokenizer.normvar_decoder_start``), so the plan and its counts need no forward pass.

A model whose main input is not token ids (``pixel_values``: ViT, CLIP's vision tower;
``input_values`` / ``input_features``: wav2vec2, Whisper) is refused before its weights are
loaded (``model_config.check_text_model``): normvar needs a text tokenizer and one hidden state per token.
"""

from __future__ import annotations

from typing import Any

import torch

from normvar_core.errors import NormvarError

STACKS = ("encoder", "decoder")


def is_encoder_decoder(model) -> bool:
    return bool(getattr(model.config, "is_encoder_decoder", False)) and hasattr(model, "get_encoder")


def select_stack(model, tokenizer, stack: str, name: str) -> tuple[Any, str | None]:
    """(the module whose hidden states the run reads, the stack recorded; None for a model with one
    stack). ``stack='decoder'`` also marks the tokenizer with the decoder's start token."""
    if stack not in STACKS:
        raise NormvarError(f"unknown stack {stack!r}", fix="use --stack encoder or --stack decoder")
    if not is_encoder_decoder(model):
        if stack == "decoder":
            raise NormvarError(
                f"--stack decoder is for encoder-decoder models (T5, BART); {name!r} "
                f"({type(model).__name__}) has one stack",
                fix="leave --stack out",
            )
        return model, None
    if stack == "encoder":
        return model.get_encoder(), "encoder"
    start = getattr(model.config, "decoder_start_token_id", None)
    if start is None:
        raise NormvarError(
            f"model {name!r} has no decoder_start_token_id in its config",
            fix="use --stack encoder, or set decoder_start_token_id in config.json",
        )
    if getattr(tokenizer, "padding_side", "right") != "right":
        raise NormvarError(
            f"--stack decoder needs a tokenizer that pads on the right ({name!r} pads on the left)",
            fix="use --stack encoder",
        )
    tokenizer.normvar_decoder_start = int(start)
    return DecoderStack(model), "decoder"


class DecoderStack(torch.nn.Module):
    """The decoder of an encoder–decoder, called like an encoder: ``forward(input_ids,
    attention_mask)`` with input_ids = [start] y_1 … y_n (right-padded) runs the encoder on
    y_1 … y_n and the decoder on the whole row; returns the decoder's output (``hidden_states``
    f_0 … f_L of the decoder). Only the decoder is a submodule (its blocks are the ones the
    architecture probe and the norm probes see); the encoder is held aside."""

    def __init__(self, model):
        super().__init__()
        self.decoder = model.get_decoder()
        self._encoder = [model.get_encoder()]
        self.config = model.config
        self.main_input_name = "input_ids"

    def get_input_embeddings(self):
        return self.decoder.get_input_embeddings()

    def forward(self, input_ids=None, attention_mask=None, output_hidden_states=True, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        enc_ids, enc_mask = input_ids[:, 1:], attention_mask[:, 1:]
        if enc_ids.shape[1] == 0:
            enc_ids, enc_mask = input_ids, attention_mask
        enc = self._encoder[0](input_ids=enc_ids, attention_mask=enc_mask)
        return self.decoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=enc.last_hidden_state,
            encoder_attention_mask=enc_mask,
            output_hidden_states=True,
            use_cache=False,
        )

    def to(self, *args, **kwargs):
        self._encoder[0].to(*args, **kwargs)
        return super().to(*args, **kwargs)

    def eval(self):
        self._encoder[0].eval()
        return super().eval()


__all__ = ["select_stack", "is_encoder_decoder", "DecoderStack", "STACKS"]
