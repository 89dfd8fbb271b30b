"""Inside the network: the output of chosen decoder layers at every denoising step, read and never written.

    with LayerTaps(model, (0, 9, 19, 29)) as taps:      # forward hooks on those decoder layers
        ...one decoder forward...
        rms, top_ids, top_probs = layer_summary(model, taps.take())   # (batch, layers, canvas) each
    ranks = lens_ranks(model, hidden, tokens)           # at the block's end, once its tokens are known

What is kept per layer, position and step (never a vocabulary-sized tensor):
- the RMS of the layer's output over the hidden size (float32);
- the logit lens: the layer's output through the model's own final norm, tied head and final logit
  softcap, exactly as `DiffusionGemmaForBlockDiffusion.forward` turns the last layer's output into
  logits (so the last layer's lens is the model's raw logits), kept as the top token's id and its
  probability at temperature 1;
- the rank of the position's committed token under each lens, computed when the block is committed
  (the committed token is unknown before): the capture keeps the step's layer outputs on the device
  until then, canvas x hidden x dtype bytes per layer and step (1.4 MB a layer-step at the real shape,
  277 MB a row for 4 layers over 48 steps).

Pitfalls of the libraries this works around:
- transformers' `output_hidden_states` holds the embeddings, then layers 0..n-2, then the *final norm's*
  output in place of layer n-1's: a hook on the layer is the only place its own output is seen.
- torch.compile guards no module hooks by default (`torch._dynamo.config.skip_nnmodule_hook_guards`):
  a hook added after the decoder was compiled would silently never run. Importing this module turns the
  guards on for the process (the guards are made when a function is compiled, so it has to happen before
  the decoder's first compile: every backend imports this module), so on the compiled path adding the
  hooks costs one recompile (cached for the next run with the same layers) and removing them falls back
  to the stock graph. A decoder compiled before that (outside the project's backends) keeps unguarded
  graphs: `LayerTaps.take` then says the hooks did not run, never records a wrong value.
"""

from __future__ import annotations

import contextlib

import torch


def decoder_layers(model) -> list:
    """The decoder's layers of a DiffusionGemmaForBlockDiffusion (the canvas runs through these only)."""
    return list(model.model.decoder.layers)


def guard_hooks() -> None:
    """Make torch.compile guard module hooks from now on (see the module docstring); idempotent."""
    torch._dynamo.config.skip_nnmodule_hook_guards = False


guard_hooks()


class LayerTaps:
    """Forward hooks on the chosen decoder layers that keep each one's latest output (detached).

    A context manager: every handle it added is removed in `finally`, on success, an error or a stop;
    a second LayerTaps on the same layers is refused (one capture at a time)."""

    def __init__(self, model, layers: tuple[int, ...]):
        self.model, self.layers = model, tuple(layers)
        self.outputs: dict[int, torch.Tensor] = {}
        self._handles: list = []

    def __enter__(self) -> "LayerTaps":
        modules = decoder_layers(self.model)
        try:
            for index in self.layers:
                module = modules[index]
                if any(getattr(hook, "_layer_tap", False) for hook in module._forward_hooks.values()):
                    raise RuntimeError(f"decoder layer {index} is already tapped: one layer capture at a time")
                self._handles.append(module.register_forward_hook(self._hook(index)))
        except BaseException:
            self.close()
            raise
        return self

    def _hook(self, index: int):
        outputs = self.outputs

        def keep(module, args, output):  # reads the output, returns nothing: the model's tensor goes on unchanged
            outputs[index] = (output[0] if isinstance(output, tuple) else output).detach()

        keep._layer_tap = True
        return keep

    def take(self) -> list[torch.Tensor]:
        """The outputs of the last forward, in the order of `layers` ((batch, canvas, hidden) each), then forgotten."""
        missing = [i for i in self.layers if i not in self.outputs]
        if missing:
            raise RuntimeError(
                f"the hooks on decoder layer(s) {missing} did not run in this step's forward: a decoder compiled "
                "before module hooks were guarded ignores them (import backends before compiling, or run eager)"
            )
        taken = [self.outputs[i] for i in self.layers]
        self.outputs.clear()
        return taken

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.outputs.clear()

    def __exit__(self, *exc) -> None:
        self.close()


def lens_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The model's own readout of a layer output: final norm, tied head, float32, final softcap."""
    logits = model.lm_head(model.model.decoder.norm(hidden)).to(torch.float32)
    cap = getattr(model, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


@torch.no_grad()
def layer_summary(model, hiddens: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(RMS float32, lens top id int32, lens top probability float16), each (batch, layers, canvas).

    One layer's lens logits (batch x canvas x vocab float32) exist at a time."""
    rms, ids, probs = [], [], []
    for hidden in hiddens:
        rms.append(hidden.float().pow(2).mean(dim=-1).sqrt())
        logits = lens_logits(model, hidden)
        best, where = logits.max(dim=-1)
        probs.append((1.0 / torch.exp(logits - best[..., None]).sum(dim=-1)).to(torch.float16))
        ids.append(where.to(torch.int32))
        del logits
    return torch.stack(rms, 1), torch.stack(ids, 1), torch.stack(probs, 1)


@torch.no_grad()
def lens_ranks(model, hiddens: list[torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    """(batch, layers, canvas) int32: how many tokens each layer's lens ranks strictly above `tokens`
    ((batch, canvas), the committed ones); 0 means the lens's top token is the committed one."""
    ranks = []
    for hidden in hiddens:
        logits = lens_logits(model, hidden)
        mine = logits.gather(-1, tokens[..., None].to(torch.int64))
        ranks.append((logits > mine).sum(dim=-1).to(torch.int32))
        del logits
    return torch.stack(ranks, 1)


@contextlib.contextmanager
def no_taps():
    """The stand-in for LayerTaps when no layer is recorded."""
    yield None
