#!/usr/bin/env python3
"""model_sweep.py -- real model-library architectures through mpc, side by side with PyTorch.

Each model (torchvision, timm, Hugging Face transformers; small sizes, dropout and stochastic depth
off) is exported with its loss as users export it: the TorchScript exporter (dynamo=False,
TrainingMode.TRAINING, do_constant_folding=False, opset 17), or with --exporter=dynamo torch's
default exporter (dynamo=True, optimize=False, its default opset; the module in training mode). PyTorch trains it with SGD(lr=0.01) for
--steps steps from the file's initializers; mpc-opt compiles it (fp32 and fp16, the same SGD) and
mpc-run trains it on the CPU on the same batch. Reported per model: the export's node count; how far
PyTorch's own fp32 trajectory lies from its fp64 one (the conditioning: batch norm over a few values
amplifies rounding); whether mpc compiled and ran it, the largest relative loss difference from
PyTorch over the steps (fp32 and fp16) and the fp16 steps the loss scaler skipped.

  python3 bench/model_sweep.py build [--steps=5] [--exporter=torchscript|dynamo] [--as-called] [--opset=N]
                                     [--out=bench/results/model_sweep[-dynamo][-as-called]-DATE.json]
                                     [NAME...]

--as-called builds the transformers models with their default attention (scaled_dot_product_attention)
and calls them with their inputs alone, their own masks and positions computed inside, as users call
them; only the dynamo exporter exports them that way.

Not part of make test (minutes, and it needs torch, torchvision, timm, transformers, onnx from pip).
"""
import argparse
import contextlib
import copy
import csv
import datetime
import io
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from library_models import CausalLMWithLoss as CausalLM  # noqa: E402  (models/)
from library_models import ClassifierWithLoss as Classifier  # noqa: E402
from library_models import PlainCausalLM  # noqa: E402


class SequenceClassifier(nn.Module):
    def __init__(self, model, mask=True):
        super().__init__()
        self.model, self.mask = model, mask

    def forward(self, tokens, y):
        extra = {"attention_mask": torch.ones_like(tokens)} if self.mask else {}
        return nn.functional.cross_entropy(self.model(input_ids=tokens, **extra).logits, y)


class Seq2Seq(nn.Module):
    def __init__(self, model, mask=True):
        super().__init__()
        self.model, self.mask = model, mask

    def forward(self, tokens, targets):
        extra = {"attention_mask": torch.ones_like(tokens)} if self.mask else {}
        return self.model(input_ids=tokens, labels=targets, **extra).loss


class ImageModelClassifier(nn.Module):
    """A transformers image classifier (pixel_values in, logits out) with its loss."""
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.model(pixel_values=x).logits, y)


def images(size, batch):
    return lambda: (torch.randn(batch, 3, size, size), torch.randint(0, 10, (batch,)))


def tokens(classes=None):
    def make():
        t = torch.randint(3, 128, (2, 16))
        return (t, torch.randint(0, classes, (2,)) if classes else torch.randint(3, 128, (2, 16)))
    return make


def torchvision_models():
    import torchvision.models as tv
    from torchvision.models import VisionTransformer
    small = images(32, 4)
    return {
        "resnet18": (lambda: Classifier(tv.resnet18(num_classes=10)), images(64, 8)),
        "mobilenet_v2": (lambda: Classifier(tv.mobilenet_v2(num_classes=10, dropout=0.0)), images(64, 8)),
        "mobilenet_v3_small": (lambda: Classifier(tv.mobilenet_v3_small(num_classes=10, dropout=0.0)), small),
        "shufflenet_v2": (lambda: Classifier(tv.shufflenet_v2_x0_5(num_classes=10)), small),
        "squeezenet1_1": (lambda: Classifier(tv.squeezenet1_1(num_classes=10, dropout=0.0)), images(64, 4)),
        "densenet121": (lambda: Classifier(tv.densenet121(num_classes=10)), small),
        "regnet_y_400mf": (lambda: Classifier(tv.regnet_y_400mf(num_classes=10)), small),
        "efficientnet_b0": (lambda: Classifier(tv.efficientnet_b0(num_classes=10)), images(64, 8)),
        "convnext_tiny": (lambda: Classifier(tv.convnext_tiny(num_classes=10)), small),
        "vit_2layer": (lambda: Classifier(VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                           hidden_dim=32, mlp_dim=64, num_classes=10)), small),
        "swin_t": (lambda: Classifier(tv.swin_t(num_classes=10)), images(64, 2)),
    }


def timm_models():
    import timm

    def make(name):
        return lambda: Classifier(timm.create_model(name, pretrained=False, num_classes=10))
    native = {"vit_tiny_patch16_224": 224, "deit_tiny_patch16_224": 224, "maxvit_nano_rw_256": 256,
              "levit_128s": 224}
    names = ["resnet50d", "efficientnet_b0", "mobilenetv3_large_100", "convnext_atto", "regnety_002",
             "vit_tiny_patch16_224", "deit_tiny_patch16_224", "maxvit_nano_rw_256", "edgenext_xx_small",
             "levit_128s", "poolformer_s12", "ghostnet_100", "rexnet_100"]
    return {"timm_" + n: (make(n), images(native.get(n, 64), 2)) for n in names}


def transformers_models(as_called=False):
    """as_called: each model with its default attention and called with its inputs alone (its own
    masks and positions), as users call it; else eager attention with the mask (and positions) given,
    which the TorchScript exporter needs."""
    import transformers as hf
    small = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 max_position_embeddings=32, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def lm(cls, cfg, positions=True):
        def make():
            if not as_called:
                cfg._attn_implementation = "eager"
            model = cls(cfg)
            model.config.use_cache = False
            return PlainCausalLM(model) if as_called else CausalLM(model, positions)
        return make, tokens()

    def wrap(wrapper, cls, cfg, classes=None):
        def make():
            if not as_called:
                cfg._attn_implementation = "eager"
            model = cls(cfg)
            model.config.use_cache = False
            return wrapper(model, mask=not as_called)
        return make, tokens(classes)
    def image(cls, cfg, size):
        def make():
            if not as_called:
                cfg._attn_implementation = "eager"
            return ImageModelClassifier(cls(cfg))
        return make, images(size, 2)
    return {
        "hf_gpt2": lm(hf.GPT2LMHeadModel, hf.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2,
                                                        n_head=2, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                                                        bos_token_id=1, eos_token_id=2)),
        "hf_llama": lm(hf.LlamaForCausalLM, hf.LlamaConfig(num_key_value_heads=1, **small)),
        "hf_mistral": lm(hf.MistralForCausalLM, hf.MistralConfig(num_key_value_heads=1, **small)),
        "hf_qwen2": lm(hf.Qwen2ForCausalLM, hf.Qwen2Config(num_key_value_heads=1, **small)),
        "hf_phi": lm(hf.PhiForCausalLM, hf.PhiConfig(**small)),
        "hf_gemma": lm(hf.GemmaForCausalLM, hf.GemmaConfig(num_key_value_heads=1, head_dim=16, **small)),
        "hf_gpt_neox": lm(hf.GPTNeoXForCausalLM, hf.GPTNeoXConfig(**small)),
        "hf_falcon": lm(hf.FalconForCausalLM, hf.FalconConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                                              num_attention_heads=2)),
        "hf_opt": lm(hf.OPTForCausalLM, hf.OPTConfig(vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                                                     num_attention_heads=2, max_position_embeddings=32,
                                                     word_embed_proj_dim=32, dropout=0.0, pad_token_id=0), False),
        "hf_bloom": lm(hf.BloomForCausalLM, hf.BloomConfig(vocab_size=128, hidden_size=32, n_layer=2, n_head=2),
                       False),
        "hf_bert": wrap(SequenceClassifier, hf.BertForSequenceClassification,
                        hf.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=32, num_labels=3, **no_dropout), 3),
        "hf_distilbert": wrap(SequenceClassifier, hf.DistilBertForSequenceClassification,
                              hf.DistilBertConfig(vocab_size=128, dim=32, hidden_dim=64, n_layers=2, n_heads=2,
                                                  max_position_embeddings=32, num_labels=3, dropout=0.0,
                                                  attention_dropout=0.0, seq_classif_dropout=0.0), 3),
        "hf_roberta": wrap(SequenceClassifier, hf.RobertaForSequenceClassification,
                           hf.RobertaConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                            intermediate_size=64, max_position_embeddings=40, num_labels=3,
                                            **no_dropout), 3),
        "hf_t5": wrap(Seq2Seq, hf.T5ForConditionalGeneration,
                      hf.T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                  dropout_rate=0.0, decoder_start_token_id=0)),
        "hf_bart": wrap(Seq2Seq, hf.BartForConditionalGeneration,
                        hf.BartConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                      decoder_ffn_dim=64, max_position_embeddings=32, dropout=0.0)),
        # Architectures beyond the first fifteen: shared layers (ALBERT), disentangled relative
        # attention (DeBERTa-v2), mixture of experts (Mixtral), local attention (ModernBERT),
        # softcapping (Gemma 2), bottlenecks (MobileBERT), vision (ViT, ConvNeXt, Swin).
        "hf_albert": wrap(SequenceClassifier, hf.AlbertForSequenceClassification,
                          hf.AlbertConfig(vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                                          num_labels=3, classifier_dropout_prob=0.0, **no_dropout), 3),
        "hf_deberta_v2": wrap(SequenceClassifier, hf.DebertaV2ForSequenceClassification,
                              hf.DebertaV2Config(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                                 num_attention_heads=2, intermediate_size=64,
                                                 max_position_embeddings=32, num_labels=3, relative_attention=True,
                                                 pos_att_type=["p2c", "c2p"], max_relative_positions=16,
                                                 position_buckets=8, **no_dropout), 3),
        "hf_electra": wrap(SequenceClassifier, hf.ElectraForSequenceClassification,
                           hf.ElectraConfig(vocab_size=128, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                            num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                                            num_labels=3, **no_dropout), 3),
        "hf_mobilebert": wrap(SequenceClassifier, hf.MobileBertForSequenceClassification,
                              hf.MobileBertConfig(vocab_size=128, embedding_size=16, hidden_size=32,
                                                  num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                                  intra_bottleneck_size=16, max_position_embeddings=32, num_labels=3,
                                                  num_feedforward_networks=2, **no_dropout), 3),
        "hf_modernbert": wrap(SequenceClassifier, hf.ModernBertForSequenceClassification,
                              hf.ModernBertConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                                  num_hidden_layers=2, num_attention_heads=2,
                                                  max_position_embeddings=32, num_labels=3, pad_token_id=0,
                                                  bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2,
                                                  global_attn_every_n_layers=2, local_attention=8), 3),
        "hf_qwen3": lm(hf.Qwen3ForCausalLM, hf.Qwen3Config(num_key_value_heads=1, head_dim=16, **small)),
        "hf_gemma2": lm(hf.Gemma2ForCausalLM, hf.Gemma2Config(num_key_value_heads=1, head_dim=16, **small)),
        "hf_phi3": lm(hf.Phi3ForCausalLM, hf.Phi3Config(num_key_value_heads=1, **small)),
        "hf_stablelm": lm(hf.StableLmForCausalLM, hf.StableLmConfig(num_key_value_heads=1, **small)),
        "hf_olmo": lm(hf.OlmoForCausalLM, hf.OlmoConfig(num_key_value_heads=1, **small)),
        "hf_starcoder2": lm(hf.Starcoder2ForCausalLM, hf.Starcoder2Config(num_key_value_heads=1, residual_dropout=0.0,
                                                                           embedding_dropout=0.0, **small)),
        "hf_gptj": lm(hf.GPTJForCausalLM, hf.GPTJConfig(vocab_size=128, n_positions=32, n_embd=32, n_layer=2,
                                                        n_head=2, rotary_dim=8, resid_pdrop=0, embd_pdrop=0,
                                                        attn_pdrop=0, bos_token_id=1, eos_token_id=2)),
        # transformers' default experts (grouped_mm, a custom op) have no ONNX translation and its
        # "eager" loop over experts does not trace: batched_mm exports, as users can choose.
        "hf_mixtral": lm(hf.MixtralForCausalLM, hf.MixtralConfig(num_key_value_heads=1, num_local_experts=4,
                                                                 num_experts_per_tok=2,
                                                                 experts_implementation="batched_mm", **small)),
        "hf_vit": image(hf.ViTForImageClassification,
                        hf.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, num_labels=10, **no_dropout), 32),
        "hf_convnext": image(hf.ConvNextForImageClassification,
                             hf.ConvNextConfig(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=10), 64),
        "hf_swin": image(hf.SwinForImageClassification,
                         hf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                       window_size=4, num_labels=10, drop_path_rate=0.0, **no_dropout), 32),
    }


# PyTorch buffers the exporter writes as float initializers: not parameters, so frozen (mpc trains
# every float initializer it is not told to freeze).
FROZEN = {"hf_bart": "final_logits_bias"}


def without_randomness(model):
    """Dropout and stochastic depth (torchvision's StochasticDepth, timm's DropPath) off: the
    trajectories are then a function of the weights and the batch alone."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if type(m).__name__ == "StochasticDepth":
            m.p = 0.0
        if type(m).__name__ == "DropPath":
            m.drop_prob = 0.0
    return model


def sgd_losses(model, args, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model(*args)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def max_rel(losses, ref):
    return max(abs(m - t) / abs(t) for m, t in zip(losses, ref))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1][:300]


def sweep_one(name, make, data, a, tmp):
    torch.manual_seed(0)
    model = without_randomness(make()).train()
    args = data()
    names = [n for n in model.forward.__code__.co_varnames[1:3]]
    path = os.path.join(tmp, name + ".onnx")
    if a.exporter == "dynamo":  # torch's default exporter; its ONNX optimizer rewrites parameters
        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(model, args, input_names=names, output_names=["loss"], dynamo=True,
                              optimize=False, opset_version=a.opset).save(path)
    else:
        torch.onnx.export(model, args, path, input_names=names, output_names=["loss"], dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=17)
    npz = os.path.join(tmp, name + "_data.npz")
    np.savez(npz, **{n: t.numpy() for n, t in zip(names, args)})
    model_proto = onnx.load(path)
    inits = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in model_proto.graph.initializer}
    # The export's traced forward moved batch-norm running statistics: start from the file.
    state = model.state_dict()
    for k, v in state.items():  # a tied weight is one initializer, under one of its names
        if k not in inits:
            tied = [t for t, w in state.items() if t in inits and w.data_ptr() == v.data_ptr()]
            if tied:
                inits[k] = inits[tied[0]]
    model.load_state_dict({k: inits.get(k, v) for k, v in state.items()})
    # PyTorch in fp64 from the same start: how far fp32 rounding alone moves the trajectory (a
    # batch norm over a few values amplifies it), the scale against which mpc's distance reads.
    wide = copy.deepcopy(model).double()
    wide_args = [t.double() if t.is_floating_point() else t for t in args]
    ref = sgd_losses(model, args, a.steps)
    ref64 = sgd_losses(wide, wide_args, a.steps)
    row = {"model": name, "nodes": len(model_proto.graph.node), "torch_losses": ref,
           "torch_fp32_vs_fp64_max_rel": max_rel(ref, ref64)}
    for precision in ("fp32", "fp16"):
        step, log = os.path.join(tmp, f"{name}.{precision}.step.onnx"), os.path.join(tmp, f"{name}.{precision}.csv")
        cmd = [os.path.join(a.build, "bin", "mpc-opt"), path, "-o", step, f"--precision={precision}",
               "--optimizer=sgd", "--lr=0.01"]
        if name in FROZEN and a.exporter == "torchscript":  # the dynamo export says what is a buffer
            cmd.append(f"--frozen={FROZEN[name]}")
        rc, err = run(cmd)
        if rc:
            row[precision] = {"error": "mpc-opt: " + err}
            continue
        rc, err = run([os.path.join(a.build, "bin", "mpc-run"), step, "--device=cpu", f"--data={npz}",
                       f"--batch={len(args[0])}", f"--steps={a.steps}", f"--log={log}", "--quiet"])
        if rc:
            row[precision] = {"error": "mpc-run: " + err}
            continue
        rows = list(csv.DictReader(open(log)))
        losses = [float(r["loss"]) for r in rows]
        row[precision] = {"losses": losses, "skipped": sum(int(r["skipped"]) for r in rows),
                          "max_rel": max_rel(losses, ref)}
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build")
    p.add_argument("names", nargs="*")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript")
    p.add_argument("--opset", type=int, help="the dynamo exporter's opset (its default when not given)")
    p.add_argument("--as-called", action="store_true",
                   help="transformers models with their default attention, called with their inputs alone")
    p.add_argument("--out")
    a = p.parse_args()
    if not a.out:
        suffix = ("" if a.exporter == "torchscript" else "-dynamo") + ("-as-called" if a.as_called else "")
        suffix += f"-opset{a.opset}" if a.opset else ""
        a.out = f"bench/results/model_sweep{suffix}-{datetime.date.today()}.json"

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    models = {**torchvision_models(), **timm_models(), **transformers_models(a.as_called)}
    chosen = a.names or list(models)
    unknown = [n for n in chosen if n not in models]
    if unknown:
        sys.exit(f"model_sweep: unknown model(s) {', '.join(unknown)}; known: {', '.join(models)}")
    results = []
    print(f"{'model':<26} {'nodes':>6} {'torch32 vs 64':>13} {'fp32 max rel':>13} {'fp16 max rel':>13} "
          f"{'fp16 skipped':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in chosen:
            make, data = models[name]
            try:
                row = sweep_one(name, make, data, a, tmp)
            except Exception as e:  # the export itself failed: torch's limitation, reported as such
                row = {"model": name, "export_error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            results.append(row)
            if "export_error" in row:
                print(f"{name:<26} export failed: {row['export_error']}", flush=True)
                continue
            cells = []
            for precision in ("fp32", "fp16"):
                r = row[precision]
                cells.append(r["error"] if "error" in r else f"{r['max_rel']:.1e}")
            skipped = row["fp16"].get("skipped", "-")
            print(f"{name:<26} {row['nodes']:>6} {row['torch_fp32_vs_fp64_max_rel']:>13.1e} {cells[0]:>13} "
                  f"{cells[1]:>13} {skipped:>13}", flush=True)
    with open(a.out, "w") as f:
        json.dump({"benchmark": "model_sweep", "date": str(datetime.date.today()), "steps": a.steps,
                   "exporter": a.exporter, "as_called": a.as_called, "opset": a.opset,
                   "torch": torch.__version__,
                   "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                            text=True).stdout.strip(), "results": results}, f, indent=1)
    print(f"results: {a.out}")


if __name__ == "__main__":
    main()
