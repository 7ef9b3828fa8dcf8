"""library_models.py -- the model-library architectures of make_library_models.py, at their tiny sizes.

Shared by models/make_library_models.py (which exports them), bench/torch_models.py (which trains
them in PyTorch beside mpc) and bench/model_sweep.py (its loss wrappers). torchvision and transformers are imported when a model is built, so that
importing this module needs only torch.
"""
import torch
import torch.nn as nn


class CausalLMWithLoss(nn.Module):
    """A transformers causal LM with its mask (and, unless positions=False, for the models that take
    none, its positions) given, and the next-token loss."""

    def __init__(self, lm, positions=True):
        super().__init__()
        self.lm, self.positions = lm, positions

    def forward(self, tokens, targets):
        extra = {"position_ids": torch.arange(tokens.shape[1]).unsqueeze(0)} if self.positions else {}
        logits = self.lm(input_ids=tokens, attention_mask=torch.ones_like(tokens), **extra).logits
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class PlainCausalLM(nn.Module):
    """A transformers causal LM called with the tokens alone (its own mask and positions), and the
    next-token loss: how users call it, which torch's dynamo exporter can export."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, tokens, targets):
        logits = self.lm(input_ids=tokens).logits
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class ClassifierWithLoss(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.net(x), y)


def gpt2_tiny():
    import transformers as hf
    cfg = hf.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = "eager"
    lm = hf.GPT2LMHeadModel(cfg)
    lm.config.use_cache = False
    return CausalLMWithLoss(lm)


def llama_tiny():
    import transformers as hf
    cfg = hf.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
                         bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = "eager"
    lm = hf.LlamaForCausalLM(cfg)
    lm.config.use_cache = False
    return CausalLMWithLoss(lm)


def swin_tiny():
    from torchvision.models.swin_transformer import SwinTransformer
    return ClassifierWithLoss(SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                              num_heads=[2, 4], window_size=[3, 3],
                                              stochastic_depth_prob=0.0, num_classes=10))


def convnext_tiny(stochastic_depth=0.0):
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ClassifierWithLoss(ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
                                       stochastic_depth_prob=stochastic_depth, num_classes=10))
