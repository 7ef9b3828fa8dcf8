#!/usr/bin/python3
"""make_transformer_stack.py -- a synthetic stack of pre-LN transformer blocks with its loss, as ONNX.

Writes the training-mode forward graph that the PyTorch exporter writes for
models/transformer.onnx, repeated over --layers blocks, with static shapes:

  x = Gather(tok.weight, tokens) + pos
  for each block l (initializers blocks.<l>.*):
    x = x + o(Attn(LN1(x)))      q/k/v/o Linear = Transpose(W) -> MatMul -> Add(b, .);
                                 heads split with Reshape [B,T,H,dh] + Transpose, scores
                                 MatMul(q, k^T) / sqrt(dh), Softmax(-1), MatMul(., v)
    x = x + fc2(Gelu(fc1(LN2(x))))   Gelu in the opset-17 erf form x*(1+Erf(x/sqrt2))*0.5
  logits = head(LNf(x));  loss = SoftmaxCrossEntropyLoss(mean) over (B*T, vocab)

Inputs tokens int64[B,T] and targets int64[B,T]; the only output is the scalar `loss`.
Initializer names follow PyTorch's state_dict of bench/torch_models.py's TransformerStack, so
that PyTorch can load the same weights. Weights are drawn as PyTorch initialises them
(Embedding N(0,1), Linear U(-1/sqrt(in), 1/sqrt(in)), pos N(0, 0.02^2), LayerNorm 1/0) from
np.random.default_rng(--seed): the same flags give the same file. --tile=N draws only each
weight's first N values and repeats them to its size (same distribution per element, not
independent): a file that xz shrinks to a few megabytes, which is how the GPU bundle carries the
step benchmark's 400 MB model (tools/gpu-check.sh --bundle).

--data-out=F.npz also writes a data set (tokens walk a fixed permutation, targets = the next
token, as models/make_issue3_models.py's transformer data) so that training can lower the loss.

Usage: bench/make_transformer_stack.py --layers=4 --d=64 --heads=4 --seq=32 --batch=8 \
           --vocab=128 --hidden=256 -o stack.onnx [--data-out=stack_data.npz --samples=64]
Needs only numpy and onnx (Debian's python3-numpy, python3-onnx).
"""
import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class GraphWriter:
    """Collects nodes and initializers, naming every value uniquely."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def fresh(self, hint):
        self.count += 1
        return f"{hint}_{self.count}"

    def op(self, op_type, inputs, hint, **attrs):
        out = self.fresh(f"/{hint}/{op_type}")
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, array, hint):
        """A Constant node (the exporter's way of writing shapes and scalars; never trainable)."""
        out = self.fresh(f"/{hint}/Constant")
        self.nodes.append(helper.make_node("Constant", [], [out], name=out,
                                           value=numpy_helper.from_array(np.asarray(array))))
        return out

    def param(self, name, array):
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name


class TiledRng:
    """np.random.Generator's draws used here, each drawing at most `tile` values and repeating
    them to the requested shape (tile 0: plain draws)."""

    def __init__(self, rng, tile):
        self.rng, self.tile = rng, tile

    def _draw(self, fn, shape):
        n = int(np.prod(shape))
        if self.tile <= 0 or n <= self.tile:
            return fn(shape)
        return np.resize(fn((self.tile,)), shape)

    def uniform(self, low, high, shape):
        return self._draw(lambda s: self.rng.uniform(low, high, s), shape)

    def standard_normal(self, shape):
        return self._draw(self.rng.standard_normal, shape)


def linear(g, rng, x, name, n_in, n_out):
    bound = 1.0 / math.sqrt(n_in)
    w = g.param(f"{name}.weight", rng.uniform(-bound, bound, (n_out, n_in)))
    b = g.param(f"{name}.bias", rng.uniform(-bound, bound, (n_out,)))
    wt = g.op("Transpose", [w], name, perm=[1, 0])
    return g.op("Add", [b, g.op("MatMul", [x, wt], name)], name)


def layer_norm(g, x, name, d):
    w = g.param(f"{name}.weight", np.ones(d))
    b = g.param(f"{name}.bias", np.zeros(d))
    return g.op("LayerNormalization", [x, w, b], name, axis=-1, epsilon=1e-5)


def attention(g, rng, x, name, a):
    dh = a.d // a.heads
    split = g.const(np.array([a.batch, a.seq, a.heads, dh], dtype=np.int64), name)

    def heads(proj, perm):
        y = linear(g, rng, x, f"{name}.{proj}", a.d, a.d)
        return g.op("Transpose", [g.op("Reshape", [y, split], name)], name, perm=perm)

    q = heads("q", [0, 2, 1, 3])  # [B,H,T,dh]
    k = heads("k", [0, 2, 3, 1])  # [B,H,dh,T]
    v = heads("v", [0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, k], name), g.const(np.float32(math.sqrt(dh)), name)], name)
    att = g.op("Softmax", [scores], name, axis=-1)
    y = g.op("Transpose", [g.op("MatMul", [att, v], name)], name, perm=[0, 2, 1, 3])
    merge = g.const(np.array([a.batch, a.seq, a.d], dtype=np.int64), name)
    return linear(g, rng, g.op("Reshape", [y, merge], name), f"{name}.o", a.d, a.d)


def gelu_erf(g, x, name):
    inner = g.op("Erf", [g.op("Div", [x, g.const(np.float32(math.sqrt(2.0)), name)], name)], name)
    one_plus = g.op("Add", [inner, g.const(np.float32(1.0), name)], name)
    return g.op("Mul", [g.op("Mul", [x, one_plus], name), g.const(np.float32(0.5), name)], name)


def build_model(a):
    rng = TiledRng(np.random.default_rng(a.seed), a.tile)
    g = GraphWriter()
    tok = g.param("tok.weight", rng.standard_normal((a.vocab, a.d)))
    pos = g.param("pos", rng.standard_normal((a.seq, a.d)) * 0.02)
    x = g.op("Add", [g.op("Gather", [tok, "tokens"], "tok"), pos], "embed")
    for l in range(a.layers):
        p = f"blocks.{l}"
        x = g.op("Add", [x, attention(g, rng, layer_norm(g, x, f"{p}.ln1", a.d), f"{p}.attn", a)], p)
        h = linear(g, rng, layer_norm(g, x, f"{p}.ln2", a.d), f"{p}.fc1", a.d, a.hidden)
        x = g.op("Add", [x, linear(g, rng, gelu_erf(g, h, f"{p}.gelu"), f"{p}.fc2", a.hidden, a.d)], p)
    logits = linear(g, rng, layer_norm(g, x, "lnf", a.d), "head", a.d, a.vocab)
    rows = a.batch * a.seq
    flat_logits = g.op("Reshape", [logits, g.const(np.array([rows, a.vocab], dtype=np.int64), "loss")], "loss")
    flat_targets = g.op("Reshape", ["targets", g.const(np.array([rows], dtype=np.int64), "loss")], "loss")
    g.nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [flat_logits, flat_targets], ["loss"],
                                    name="/loss/SoftmaxCrossEntropyLoss", reduction="mean"))
    graph = helper.make_graph(
        g.nodes, f"transformer_stack_L{a.layers}",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, [a.batch, a.seq]),
         helper.make_tensor_value_info("targets", TensorProto.INT64, [a.batch, a.seq])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="mpc bench/make_transformer_stack.py")
    # The head count is in no weight's shape; PyTorch's mirror (bench/torch_models.py) reads it here.
    helper.set_model_props(model, {"heads": str(a.heads)})
    onnx.checker.check_model(model)
    return model


def make_data(a):
    """Sequences that walk one fixed permutation of the vocabulary; the target is the next token."""
    rng = np.random.default_rng(a.seed + 1)
    perm = rng.permutation(a.vocab)
    tokens = np.empty((a.samples, a.seq), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, a.vocab, size=a.samples)
    for t in range(1, a.seq):
        tokens[:, t] = perm[tokens[:, t - 1]]
    return {"tokens": tokens, "targets": perm[tokens].astype(np.int64)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=None, help="MLP width (default 4*d)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tile", type=int, default=0,
                    help="draw N values per weight and repeat them (0: every value drawn)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--data-out", default=None, help="also write tokens/targets to this .npz")
    ap.add_argument("--samples", type=int, default=None, help="samples in --data-out (default 8*batch)")
    a = ap.parse_args()
    a.hidden = a.hidden or 4 * a.d
    a.samples = a.samples or 8 * a.batch
    if a.tile < 0:
        ap.error(f"--tile must be >= 0 (got {a.tile})")
    if a.layers < 1 or a.d % a.heads != 0:
        ap.error(f"need --layers >= 1 and --d divisible by --heads (got layers {a.layers}, d {a.d}, heads {a.heads})")
    onnx.save(build_model(a), a.output)
    if a.data_out:
        np.savez(a.data_out, **make_data(a))


if __name__ == "__main__":
    main()
