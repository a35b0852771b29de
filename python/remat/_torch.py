"""The two ends that touch torch: export() writes a module as the ONNX file
remat reads, load_into() puts trained parameters back into the module.
torch is imported when they are called, so `import remat` works without it.
"""
import inspect
import os

from ._compiler import RematError
from .trainer import Trainer, file_name, read_params, remat_name


def export(module, example_inputs, path, input_names=None, opset=17,
           forward_only=False):
    """torch.onnx.export as remat wants it: the module in training mode
    (Dropout and BatchNorm as they train), opset 17, no constant folding
    (it would fold a parameter's transpose into a nameless constant, which
    load_into could not name), parameters as initializers under their
    state_dict names, the one output named "loss". The module's forward
    takes the batch (inputs and targets) and returns the loss, a 0-d
    tensor: that is what remat differentiates. forward_only=True exports a
    forward whose output is not a loss (remat then plans inference).

    input_names defaults to the forward's parameter names. The module is
    left as it was: its mode, its buffers (the forwards that check and
    trace it would move BatchNorm's running statistics) and torch's random
    state. Returns path."""
    import torch
    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) \
        else (example_inputs,)
    names = list(input_names) if input_names else _arg_names(module, len(args))
    was_training = module.training
    buffers = {k: v.detach().clone() for k, v in module.named_buffers()}
    module.train()
    with torch.random.fork_rng(devices=[]):
        try:
            _export(module, args, os.fspath(path), names, opset, forward_only)
        finally:
            module.train(was_training)
            with torch.no_grad():
                for k, v in module.named_buffers():
                    v.copy_(buffers[k])
    return os.fspath(path)


def _export(module, args, path, names, opset, forward_only):
    """The check that forward returns the loss, then torch's exporter."""
    import torch
    if not forward_only:
        with torch.no_grad():
            out = module(*args)
        if not (isinstance(out, torch.Tensor) and out.dim() == 0):
            raise RematError(
                "export: the module's forward must return the loss, a 0-d "
                f"tensor (it returned {_what(out)}); put the loss inside "
                "forward, or pass forward_only=True")
    more = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        more["dynamo"] = False     # the exporter that honours training=
    torch.onnx.export(module, args, path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=names,
                      output_names=["loss"] if not forward_only else None,
                      **more)


def load_into(module, checkpoint, strict=True):
    """Copies trained values into module's state_dict entries of the same
    names (as remat spells them: remat_name): checkpoint is a Trainer (its
    current parameters), a folder of param.NAME.npy files (a checkpoint
    --save wrote, or --dump's), or a dict of arrays. With strict, every
    parameter of the module must be there; buffers (BatchNorm's running
    statistics) are loaded when they are. A shape that differs is an
    error. Returns the names loaded (torch's)."""
    import torch
    values = _values_of(checkpoint)
    values = {**{k: values[remat_name(k)] for k in module.state_dict()
                 if remat_name(k) in values}, **values}
    state = module.state_dict()
    missing = [n for n, _ in module.named_parameters() if n not in values]
    if strict and missing:
        raise RematError(f"load_into: the checkpoint has no {', '.join(missing)}"
                         " (strict=False loads what it has)")
    loaded = []
    with torch.no_grad():
        for name, t in state.items():
            if name not in values:
                continue
            v = torch.as_tensor(values[name])
            if tuple(v.shape) != tuple(t.shape):
                raise RematError(f"load_into: {name} is {tuple(v.shape)} in the "
                                 f"checkpoint, {tuple(t.shape)} in the module")
            t.copy_(v.to(dtype=t.dtype, device=t.device))
            loaded.append(name)
    return loaded


def _values_of(checkpoint):
    if isinstance(checkpoint, Trainer):
        return checkpoint.parameters()
    if isinstance(checkpoint, dict):
        return checkpoint
    folder = os.fspath(checkpoint)
    if not os.path.isdir(folder):
        raise RematError(f"load_into: {folder} is not a folder of "
                         f"param.NAME.npy files ({file_name('param', 'NAME')})")
    return read_params(folder)


def _arg_names(module, n):
    params = [p for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < n:
        raise RematError(f"export: {n} example inputs but forward takes "
                         f"{len(params)}; give input_names")
    return [p.name for p in params[:n]]


def _what(out):
    import torch
    if isinstance(out, torch.Tensor):
        return f"a tensor of shape {tuple(out.shape)}"
    return type(out).__name__
