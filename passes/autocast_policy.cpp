// The autocast policy table and the user's overrides on top of it.
//
// Each row says how one op runs under mixed precision and why. The sources:
// PyTorch autocast's "lower precision" and "float32" op lists (CUDA), the
// allow/deny/infer lists of TensorFlow's auto_mixed_precision_lists.h, and
// TVM's ToMixedPrecision ALWAYS/FOLLOW/NEVER lists. Where they disagree the
// reason says which one we follow. Data movement and element-wise ops
// Follow, so that runs of them between two Lower ops stay in fp16 with no
// cast of their own; anything that exponentiates, sums many terms or
// normalises is an Fp32 island (SPEC: "fp32 islands for softmax, log-softmax,
// losses, normalisations, reductions, exp/log/pow").
#include "passes/autocast_policy.h"

#include "ir/mpc_ops.h"
#include "ir/name_index.h"
#include "support/diagnostics.h"

#include <deque>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mpc {
namespace {

using PC = PrecisionClass;

/// Bit mask of uncast inputs.
constexpr uint32_t inputBit(int i) { return uint32_t(1) << i; }

const char *const kTraining = "ai.onnx.preview.training";

const std::vector<PolicyEntry> &table() {
  static const std::vector<PolicyEntry> rows = {
      // --- Lower: matrix products (all three lists agree) -----------------
      {"", "Gemm", PC::Lower, 0,
       "matrix product on Tensor Cores, fp32 accumulation (torch addmm/linear, "
       "TF MatMul, TVM dense)"},
      {"", "MatMul", PC::Lower, 0,
       "matrix product on Tensor Cores, fp32 accumulation (torch matmul/bmm, "
       "TF BatchMatMul, TVM batch_matmul)"},
      {"", "Conv", PC::Lower, 0,
       "convolution on Tensor Cores, fp32 accumulation (torch conv*d, TF "
       "Conv2D, TVM conv*d)"},
      {"", "ConvTranspose", PC::Lower, 0,
       "transposed convolution, same kernels as Conv's backward (torch "
       "conv_transpose*d, TVM conv*d_transpose)"},

      // --- Fp32: softmax and losses ----------------------------------------
      {"", "Softmax", PC::Fp32, 0,
       "exp of the inputs and a normalising sum: overflows fp16 (torch "
       "softmax, "
       "TVM softmax)"},
      {"", "LogSoftmax", PC::Fp32, 0,
       "log of a sum of exps, needs fp32 near 0 (torch log_softmax)"},
      {"", "SoftmaxCrossEntropyLoss", PC::Fp32, 0,
       "loss: log-softmax plus a mean over the batch (torch cross_entropy, TF "
       "SoftmaxCrossEntropyWithLogits, TVM cross_entropy)"},
      {"", "NegativeLogLikelihoodLoss", PC::Fp32, 0,
       "loss: a weighted mean over the batch (torch nll_loss)"},
      {"", "Hardmax", PC::Follow, 0,
       "one-hot of the arg max: a comparison, exact in any precision"},

      // --- Fp32: reductions ------------------------------------------------
      {"", "ReduceSum", PC::Fp32, 0,
       "long sums overflow fp16 and lose low bits (torch sum, TF Sum, TVM "
       "sum)"},
      {"", "ReduceMean", PC::Fp32, 0,
       "a long sum before the division (TF Mean, TVM mean)"},
      {"", "ReduceProd", PC::Fp32, 0,
       "products over many terms overflow (torch prod)"},
      {"", "ReduceSumSquare", PC::Fp32, 0,
       "squares overflow fp16 before they are summed (torch norm)"},
      {"", "ReduceL1", PC::Fp32, 0, "a long sum (torch norm)"},
      {"", "ReduceL2", PC::Fp32, 0,
       "sum of squares then sqrt (torch norm, TVM l2_normalize)"},
      {"", "ReduceLogSum", PC::Fp32, 0, "log of a long sum (torch logsumexp)"},
      {"", "ReduceLogSumExp", PC::Fp32, 0,
       "exp, long sum and log (torch logsumexp)"},
      {"", "ReduceMax", PC::Follow, 0,
       "picks one element, exact in any precision (TF Max, TVM max)"},
      {"", "ReduceMin", PC::Follow, 0,
       "picks one element, exact in any precision (TF Min, TVM min)"},
      {"", "ArgMax", PC::Follow, 0,
       "index of the largest element, int64 output (TF/TVM argmax)"},
      {"", "ArgMin", PC::Follow, 0,
       "index of the smallest element, int64 output (TF/TVM argmin)"},
      {"", "TopK", PC::Follow, inputBit(1),
       "picks elements and their int64 indices, exact in any precision "
       "(torch topk/sort)"},
      {"", "CumSum", PC::Fp32, 0, "a running sum over an axis (torch cumsum)"},
      {"", "GlobalAveragePool", PC::Fp32, 0,
       "mean over the whole spatial extent, a large sum (TVM global_avg_pool)"},

      // --- Fp32: normalisations --------------------------------------------
      {"", "BatchNormalization", PC::Fp32, 0,
       "batch statistics are means of squares; running mean/var are fp32 "
       "state (SPEC: normalisations are fp32 islands). The op itself also "
       "runs fp16/bf16 X with fp32 scale/B/statistics (Y in X's dtype, "
       "statistics fp32, as cuDNN and torch batch_norm under autocast)"},
      {"", "LayerNormalization", PC::Fp32, 0,
       "mean and variance over the feature axis (torch layer_norm, TVM "
       "layer_norm)"},
      {kMpcDomain, "RMSNormalization", PC::Fp32, 0,
       "mean of squares over the feature axis (torch rms_norm, which "
       "autocast runs in fp32)"},
      {"", "InstanceNormalization", PC::Fp32, 0,
       "mean and variance per channel (torch instance_norm via batch_norm "
       "statistics in fp32)"},
      {"", "GroupNormalization", PC::Fp32, 0,
       "mean and variance per group (torch group_norm)"},
      {"", "LpNormalization", PC::Fp32, 0,
       "divides by a norm, a sum of powers (torch normalize, TVM "
       "l2_normalize)"},

      // --- Fp32: functions whose result outgrows their input ---------------
      {"", "Exp", PC::Fp32, 0,
       "overflows fp16 above 11 (torch exp, TF Exp, TVM exp)"},
      {"", "Log", PC::Fp32, 0,
       "needs fp32 resolution near 0 and 1 (torch log, TF Log)"},
      {"", "Pow", PC::Fp32, 0,
       "grows or shrinks fast with the exponent (torch pow, TF Pow, TVM "
       "power)"},
      {"", "Sqrt", PC::Fp32, 0,
       "in training graphs it takes a variance or a sum of squares, which is "
       "fp32 already (torch rsqrt/norm); keeping it fp32 avoids a cast pair"},
      {"", "Reciprocal", PC::Fp32, 0,
       "1/x overflows fp16 for |x| < 6e-5 (torch reciprocal)"},
      {"", "Softplus", PC::Fp32, 0, "log(1 + exp(x)) (torch softplus)"},
      {kMpcDomain, "LogSigmoid", PC::Fp32, 0,
       "log sigmoid computed stably (fuse-log-sigmoid's Log(Sigmoid(x)) of "
       "binary_cross_entropy_with_logits, logsigmoid, "
       "multilabel_soft_margin_loss): torch autocast runs "
       "binary_cross_entropy_with_logits and log_sigmoid in fp32, and a "
       "sigmoid rounded to fp16 loses log(sigmoid) near 1"},
      {"", "Range", PC::Fp32, 0,
       "a float limit may not be representable in fp16 (TVM arange)"},
      {"", "Erf", PC::Follow, 0,
       "bounded in [-1, 1], safe in fp16 (TF infer list, torch runs erf in "
       "the input type; TVM's never-listing is an LLVM lowering gap, not "
       "numerics)"},

      // --- Follow: element-wise arithmetic and activations -----------------
      {"", "Add", PC::Follow, 0,
       "element-wise, one rounding (TF infer Add, TVM add)"},
      {"", "Sub", PC::Follow, 0,
       "element-wise, one rounding (TF infer Sub, TVM subtract)"},
      {"", "Mul", PC::Follow, 0,
       "element-wise, one rounding (TF infer Mul, TVM multiply)"},
      {"", "Div", PC::Follow, 0,
       "element-wise, one rounding (TF infer RealDiv, TVM divide)"},
      {"", "Neg", PC::Follow, 0, "exact in any precision (TF clear Neg)", true},
      {"", "Abs", PC::Follow, 0, "exact in any precision (TF clear Abs)", true},
      {"", "Sign", PC::Follow, 0, "exact in any precision (TF clear Sign)"},
      {"", "Floor", PC::Follow, 0, "exact in any precision (TF clear Floor)"},
      {"", "Ceil", PC::Follow, 0, "exact in any precision (TF clear Ceil)"},
      {"", "Round", PC::Follow, 0, "exact in any precision (TF clear Round)"},
      {"", "Max", PC::Follow, 0,
       "picks one input, exact (TF clear Maximum, TVM maximum)"},
      {"", "Min", PC::Follow, 0,
       "picks one input, exact (TF clear Minimum, TVM minimum)"},
      {"", "Mod", PC::Follow, 0,
       "a remainder is exact in any precision (torch fmod/remainder); "
       "exported models use it on int64 shapes"},
      {"", "Sum", PC::Follow, 0,
       "element-wise sum of a few tensors (gradient accumulation), TF infer "
       "AddN"},
      {"", "Mean", PC::Follow, 0,
       "element-wise mean of a few tensors, not a reduction"},
      {"", "Clip", PC::Follow, 0,
       "exact in any precision; bounds take the input's dtype (TF clear "
       "ClipByValue, TVM clip)"},
      {"", "Relu", PC::Follow, 0, "exact in any precision (TF clear Relu)",
       true},
      {"", "LeakyRelu", PC::Follow, 0,
       "one multiply (TF infer LeakyRelu, TVM leaky_relu)"},
      {"", "PRelu", PC::Follow, 0, "one multiply (TVM prelu)"},
      {"", "Elu", PC::Follow, 0, "bounded below by -alpha (TF infer Elu)"},
      {"", "Selu", PC::Follow, 0, "bounded below (TF infer Selu)"},
      {"", "Gelu", PC::Follow, 0,
       "x times a bounded factor (torch runs gelu in the input type)"},
      {"", "HardSigmoid", PC::Follow, 0, "piecewise linear, bounded"},
      {"", "HardSwish", PC::Follow, 0, "piecewise, x times a bounded factor"},
      {"", "Softsign", PC::Follow, 0, "bounded in [-1, 1] (TF infer Softsign)"},
      {"", "Sigmoid", PC::Follow, 0,
       "saturates in a narrow range (TF infer Sigmoid, TVM sigmoid)"},
      {"", "Tanh", PC::Follow, 0,
       "saturates in a narrow range (TF infer Tanh, TVM tanh)"},
      {"", "Sin", PC::Follow, 0, "bounded in [-1, 1]"},
      {"", "Cos", PC::Follow, 0, "bounded in [-1, 1]"},
      {"", "Dropout", PC::Follow, inputBit(1),
       "a mask and one multiply (TVM dropout); the ratio keeps its own dtype"},

      // --- Follow: comparisons and selection -------------------------------
      {"", "Where", PC::Follow, 0,
       "selects elements, exact (TF clear SelectV2, TVM where)"},
      {"", "Equal", PC::Follow, 0, "comparison, bool output (TF clear Equal)"},
      {"", "Less", PC::Follow, 0, "comparison, bool output (TF clear Less)"},
      {"", "LessOrEqual", PC::Follow, 0,
       "comparison, bool output (TF clear LessEqual)"},
      {"", "Greater", PC::Follow, 0,
       "comparison, bool output (TF clear Greater)"},
      {"", "GreaterOrEqual", PC::Follow, 0,
       "comparison, bool output (TF clear GreaterEqual)"},
      {"", "IsNaN", PC::Follow, 0, "classification, bool output (TF IsNan)"},
      {"", "And", PC::AnyType, 0, "logic on bool operands"},
      {"", "Or", PC::AnyType, 0, "logic on bool operands"},
      {"", "Xor", PC::AnyType, 0, "logic on bool operands"},
      {"", "IsInf", PC::Follow, 0, "classification, bool output (TF IsInf)"},

      // --- Follow: data movement -------------------------------------------
      {"", "Identity", PC::Follow, 0, "moves data (TF clear Identity)", true},
      {"", "Reshape", PC::Follow, 0, "moves data (TF clear, TVM reshape)",
       true},
      {"", "Flatten", PC::Follow, 0, "moves data (TVM batch_flatten)", true},
      {"", "Transpose", PC::Follow, 0, "moves data (TF clear, TVM transpose)",
       true},
      {"", "Squeeze", PC::Follow, 0, "moves data (TF clear, TVM squeeze)",
       true},
      {"", "Unsqueeze", PC::Follow, 0,
       "moves data (TF clear ExpandDims, TVM expand_dims)", true},
      {"", "Concat", PC::Follow, 0,
       "moves data; mixed inputs promote (TF clear ConcatV2, TVM concatenate)"},
      {"", "Split", PC::Follow, 0, "moves data (TF clear Split, TVM split)"},
      {"", "Gather", PC::Follow, 0,
       "moves data; an fp32 embedding table stays fp32 (TF clear GatherV2, "
       "TVM take)"},
      {"", "GatherElements", PC::Follow, 0, "moves data (TVM gather)"},
      {"", "GatherND", PC::Follow, inputBit(1),
       "reads slices of data at int64 positions: moves data"},
      {"", "ScatterND", PC::Follow, inputBit(1),
       "writes updates into a copy of data at int64 positions: moves data"},
      {"", "ScatterElements", PC::Follow, inputBit(1),
       "writes updates into a copy of data at indexed elements: moves data"},
      {"", "Slice", PC::Follow, 0,
       "moves data (TF clear StridedSlice, TVM strided_slice)"},
      {"", "Expand", PC::Follow, 0,
       "moves data (TF clear BroadcastTo, TVM broadcast_to)", true},
      {"", "Tile", PC::Follow, 0, "moves data (TF clear Tile, TVM tile)", true},
      {"", "Trilu", PC::Follow, inputBit(1),
       "moves data, zeroes the rest (torch triu/tril, TF MatrixBandPart); "
       "k keeps its int64"},
      {"", "Pad", PC::Follow, 0,
       "moves data; the pad value takes the input's dtype (TF clear Pad, TVM "
       "pad)"},
      {"", "MaxPool", PC::Follow, 0,
       "picks one element per window, exact (TF clear MaxPool, TVM "
       "max_pool*d)"},
      {"", "GlobalMaxPool", PC::Follow, 0,
       "picks one element, exact (TVM global_max_pool2d)"},
      {"", "AveragePool", PC::Follow, 0,
       "a mean over a small window (TF infer AvgPool, TVM avg_pool*d)"},

      // --- untouched ONNX ops ----------------------------------------------
      {"", "Shape", PC::AnyType, 0, "reads only the shape of its input"},
      {"", "Size", PC::AnyType, 0, "reads only the shape of its input"},
      {"", "Cast", PC::AnyType, 0,
       "converts explicitly; its output dtype is its 'to' attribute"},
      {"", "Constant", PC::AnyType, 0,
       "no inputs; its consumers convert it at compile time when needed"},
      {"", "ConstantOfShape", PC::AnyType, 0,
       "int64 shape input; output dtype from its attribute"},
      {"", "RandomUniform", PC::AnyType, 0,
       "no inputs; output dtype from its attribute"},
      {"", "RandomNormal", PC::AnyType, 0,
       "no inputs; output dtype from its attribute"},
      {"", "RandomUniformLike", PC::AnyType, 0,
       "reads only the shape of its input; draws in fp32, rounded to its "
       "dtype attribute (torchvision's stochastic depth sets float)"},
      {"", "RandomNormalLike", PC::AnyType, 0,
       "reads only the shape of its input; draws in fp32, rounded to its "
       "dtype attribute"},
      {"", "Bernoulli", PC::AnyType, 0,
       "compares a draw with each probability, read widened to fp32"},
      {"", "CastLike", PC::Keep, 0,
       "its output dtype is its second input's: changing that would change "
       "what the op means"},

      // --- mpc backward ops (ir/mpc_ops.h), grouped by op category: the
      // file of passes/gradients/ whose rules emit them ------------------
      // elementwise
      {kMpcDomain, "ErfGrad", PC::Follow, 0,
       "dY times 2/sqrt(pi) exp(-x^2), a factor in (0, 1.13]: no overflow, "
       "like Erf itself"},
      {kMpcDomain, "ClipGrad", PC::Follow, 0,
       "selects dY or 0 by a comparison, exact"},
      {kMpcDomain, "ExtremumGrad", PC::Follow, 0,
       "selects dY (split among a few ties), like Max/Min"},
      // activation
      {kMpcDomain, "ReluGrad", PC::Follow, 0,
       "selects dY where Y > 0, exact (TF clear ReluGrad)"},
      {kMpcDomain, "SoftmaxGrad", PC::Fp32, inputBit(1),
       "sum over the softmax axis of dY * Y, like Softmax itself; Y is read "
       "as stored (the kernel widens it exactly, so an fp16 Y needs no fp32 "
       "copy)"},
      {kMpcDomain, "LogSoftmaxGrad", PC::Fp32, inputBit(1),
       "exp(Y) times a sum over the axis, like LogSoftmax itself; Y is read "
       "as stored (the kernel widens it exactly)"},
      {kMpcDomain, "LogSigmoidGrad", PC::Fp32, 0,
       "dY times sigmoid(-X), the backward of an fp32 LogSigmoid island "
       "(torch's log_sigmoid_backward runs in fp32 under autocast)"},
      {kMpcDomain, "GeluGrad", PC::Follow, 0,
       "dY times a bounded derivative, like Gelu itself"},
      {kMpcDomain, "LeakyReluGrad", PC::Follow, 0,
       "dY or alpha * dY, one multiply, like LeakyRelu"},
      // reduction
      {kMpcDomain, "ReduceGrad", PC::Fp32, inputBit(1),
       "gradient of an fp32 reduction, a division by the reduced count for a "
       "mean; X is read for its shape only"},
      {kMpcDomain, "ReduceExtremumGrad", PC::Follow, 0,
       "selects dY (split among ties), like ReduceMax"},
      {kMpcDomain, "SumToShape", PC::Fp32, inputBit(1),
       "a reduction over broadcast axes (bias gradients sum over the batch); "
       "the kernel accumulates in fp32 either way, an fp32 result also keeps "
       "the sum's range; X is read for its shape only"},
      {kMpcDomain, "SumToShapeAs", PC::Keep, 0,
       "reads dY as stored and writes X's (wider) dtype, the precision "
       "autocast chose for the SumToShape it replaces"},
      // conv_pool
      {kMpcDomain, "ConvGradInput", PC::Lower, 0,
       "convolution data gradient on Tensor Cores, fp32 accumulation, like "
       "Conv (torch conv backward under autocast, cuDNN dgrad)"},
      {kMpcDomain, "ConvGradWeight", PC::Lower, 0,
       "convolution weight gradient on Tensor Cores, fp32 accumulation "
       "(cuDNN wgrad); the result is cast to the fp32 master like any fp16 "
       "parameter gradient"},
      {kMpcDomain, "MaxPoolGrad", PC::Follow, 0,
       "routes dY to each window's maximum, exact (TF clear MaxPoolGrad); X "
       "widened to dY's dtype keeps its order, so the same element wins"},
      {kMpcDomain, "AveragePoolGrad", PC::Follow, 0,
       "dY divided by a small window count, like AveragePool"},
      // normalization
      {kMpcDomain, "LayerNormalizationGrad", PC::Fp32, 0,
       "sums over the normalised axes and the batch, like LayerNormalization "
       "itself (torch layer_norm backward runs in fp32 under autocast)"},
      {kMpcDomain, "RMSNormalizationGrad", PC::Fp32, 0,
       "sums over the normalised axes and the batch, like RMSNormalization "
       "itself"},
      {kMpcDomain, "BatchNormalizationGrad", PC::Fp32, 0,
       "sums over the batch and the spatial axes and the batch statistics, "
       "like BatchNormalization itself"},
      // shape_ops
      {kMpcDomain, "SliceGrad", PC::Follow, inputBit(1),
       "moves dY into zeros, exact; data is read for its shape only", true},
      // gather_scatter
      {kMpcDomain, "GatherGrad", PC::Fp32, inputBit(2),
       "scatter-add of an embedding's gradient: repeated tokens accumulate, "
       "an fp32 result keeps the small contributions; data is read for its "
       "shape only"},
      {kMpcDomain, "GatherElementsGrad", PC::Fp32, inputBit(2),
       "scatter-add of GatherElements' gradient: repeated indices accumulate "
       "(as GatherGrad); data is read for its shape only"},
      // loss
      {kMpcDomain, "SoftmaxCrossEntropyLossGrad", PC::Fp32, 0,
       "exp of the log-probabilities and the loss's normalisation"},
      {kMpcDomain, "NegativeLogLikelihoodLossGrad", PC::Fp32, 0,
       "the loss's weighted normalisation"},
      // random
      {kMpcDomain, "DropoutGrad", PC::Follow, inputBit(2),
       "the forward's mask and one multiply, like Dropout; the ratio keeps "
       "its own dtype"},

      // --- mpc fused ops (the fused category): what the fusion passes
      // make of forward and backward node sequences ---------------------
      {kMpcDomain, "Gelu", PC::Follow, 0,
       "ONNX's Gelu for opset < 20 (fuse-gelu): x times a bounded factor"},
      {kMpcDomain, "GeluTanh", PC::Follow, 0,
       "ONNX's Gelu approximate=tanh for opset < 20 (fuse-gelu): x times a "
       "bounded factor"},
      {kMpcDomain, "FusedMatMul", PC::Lower, 0,
       "MatMul of transposed operands (fold-transpose): matrix product on "
       "Tensor Cores, fp32 accumulation, like MatMul"},
      {kMpcDomain, "LayerNormalizationTo", PC::Keep, 0,
       "LayerNormalization in X's (fp32) dtype writing its 'to' dtype and "
       "the Cast down to the next matrix product, the precisions autocast "
       "chose for the nodes it replaces"},
      {kMpcDomain, "RMSNormalizationTo", PC::Keep, 0,
       "RMSNormalization in X's (fp32) dtype writing its 'to' dtype and the "
       "Cast down to the next matrix product, as LayerNormalizationTo"},
      {kMpcDomain, "AddTo", PC::Keep, 0,
       "an fp32 Add of its inputs widened as read, stored in its 'to' dtype "
       "(and cast down to 'low'), the precisions autocast chose for the "
       "nodes it replaces"},
      {kMpcDomain, "SoftmaxTo", PC::Keep, 0,
       "reads X as stored and computes and writes its 'to' dtype, the "
       "precision autocast chose for the Softmax it replaces"},
      {kMpcDomain, "DivSoftmaxTo", PC::Keep, 0,
       "the attention's scaling Div and its SoftmaxTo in one node, each "
       "rounding where the nodes it replaces rounded"},
      {kMpcDomain, "SoftmaxGradAs", PC::Keep, 0,
       "reads dY as stored and writes Y's (wider) dtype, the precision "
       "autocast chose for the SoftmaxGrad it replaces"},
      {kMpcDomain, "SoftmaxGradDiv", PC::Keep, 0,
       "SoftmaxGradAs, its Div and the Cast after it in one node, each "
       "rounding where the nodes it replaces rounded"},

      // --- mpc loss-scale and optimizer ops: run after autocast, on fp32 ---
      {kMpcDomain, "UnscaleGradients", PC::Keep, 0,
       "loss-scale: unscales in fp32 by contract"},
      {kMpcDomain, "UpdateLossScale", PC::Keep, 0,
       "loss-scale: fp32 scale, int64 tracker"},
      {kMpcDomain, "AllReduce", PC::Keep, 0,
       "data parallel: gradients and the overflow flag combined as they are"},
      {kMpcDomain, "ClipGradNorm", PC::Keep, 0,
       "optimizer: the norm is accumulated in fp32 by contract"},
      {kMpcDomain, "SGD", PC::Keep, 0,
       "optimizer: updates fp32 master weights"},
      {kMpcDomain, "Adam", PC::Keep, 0,
       "optimizer: updates fp32 master weights and moments"},
      {kMpcDomain, "IncrementStep", PC::Keep, 0, "optimizer: int64 counter"},
      {kMpcDomain, "LearningRate", PC::Keep, 0,
       "optimizer: the rate in fp64, as torch's Python float"},

      // --- ONNX training ops (input form 2, replaced by autodiff/optimizer) -
      {kTraining, "Gradient", PC::Keep, 0,
       "replaced by autodiff before autocast runs"},
      {kTraining, "Adam", PC::Keep, 0, "optimizer state stays as given"},
      {kTraining, "Momentum", PC::Keep, 0, "optimizer state stays as given"},
      {kTraining, "Adagrad", PC::Keep, 0, "optimizer state stays as given"},
  };
  return rows;
}

/// The op name a user writes in --fp32-ops, with an optional "mpc." prefix.
std::string stripMpcPrefix(const std::string &name) {
  const std::string prefix = std::string(kMpcDomain) + ".";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

/// Rows of the ONNX or mpc domain named `op` (the names never collide).
const PolicyEntry *findOverridable(const std::string &op) {
  for (const PolicyEntry &e : table())
    if (op == e.op &&
        (e.domain[0] == '\0' || e.domain == std::string(kMpcDomain)))
      return &e;
  return nullptr;
}

std::set<std::string> parseOpList(const char *flag,
                                  const std::vector<std::string> &names) {
  std::set<std::string> out;
  for (const std::string &raw : names) {
    std::string op = stripMpcPrefix(raw);
    const PolicyEntry *e = findOverridable(op);
    if (!e)
      error() << flag << ": unknown op '" << raw
              << "' (not in the autocast policy table)";
    if (e->cls == PC::Keep || e->cls == PC::AnyType)
      error() << flag << ": op '" << raw
              << "' is never cast by autocast, its precision cannot be set";
    out.insert(op);
  }
  return out;
}

} // namespace

const char *precisionClassName(PrecisionClass c) {
  switch (c) {
  case PC::Lower:
    return "lower";
  case PC::Fp32:
    return "fp32";
  case PC::Follow:
    return "follow";
  case PC::Keep:
    return "keep";
  case PC::AnyType:
    return "any";
  }
  return "?";
}

const std::vector<PolicyEntry> &autocastPolicyTable() { return table(); }

const PolicyEntry *findPolicyEntry(const std::string &domain,
                                   const std::string &op) {
  // Looked up for every node autocast sees: the table is indexed once by op
  // name in a flat NameIndex (one cheap hash and one probe per lookup, where
  // std::unordered_map<std::string_view, ...> hashed with _Hash_bytes and
  // walked a bucket list), then the few rows of that op match the domain.
  struct OpRows {
    std::string op;
    /// Each row of the op with its domain ("" for ONNX), length known.
    std::vector<std::pair<std::string_view, const PolicyEntry *>> rows;
    const std::string &name() const { return op; } // NameIndex's key
  };
  static const std::deque<OpRows> byOpRows = [] {
    std::deque<OpRows> rows;
    std::unordered_map<std::string_view, OpRows *> seen;
    for (const PolicyEntry &e : table()) {
      OpRows *&r = seen[e.op];
      if (!r)
        r = &rows.emplace_back(OpRows{e.op, {}});
      r->rows.emplace_back(e.domain, &e);
    }
    return rows;
  }();
  static const NameIndex<const OpRows> byOp = [] {
    NameIndex<const OpRows> index;
    for (const OpRows &r : byOpRows)
      index.insert(&r);
    return index;
  }();
  const OpRows *found = byOp.find(op);
  if (!found)
    return nullptr;
  // "ai.onnx" is the default domain spelled out.
  std::string_view d = domain;
  if (d == "ai.onnx")
    d = std::string_view();
  for (const auto &[rowDomain, e] : found->rows)
    if (d == rowDomain)
      return e;
  return nullptr;
}

AutocastPolicy AutocastPolicy::fromOptions(const CompileOptions &options) {
  AutocastPolicy p;
  p.fp32Ops_ = parseOpList("--fp32-ops", options.fp32Ops);
  p.fp16Ops_ = parseOpList("--fp16-ops", options.fp16Ops);
  for (const std::string &op : p.fp32Ops_)
    if (p.fp16Ops_.count(op))
      error() << "op '" << op << "' is given in both --fp32-ops and --fp16-ops";
  p.nodePattern_ = compileNamePattern(options.fp32Nodes, "fp32-nodes");
  return p;
}

Classification AutocastPolicy::explain(const Node &n) const {
  const PolicyEntry *e = findPolicyEntry(n.domain(), n.opType());
  PrecisionClass cls =
      e ? e->cls
        : (n.domain().empty() || std::string_view(n.domain()) == "ai.onnx"
               ? PC::Fp32
               : PC::Keep);
  Classification c{cls, e ? ClassSource::Table : ClassSource::UnlistedOp, e,
                   cls};
  // Untouched ops stay untouched: forcing Adam or Shape to a precision means
  // nothing, and the regex may match them by accident.
  if (cls == PC::Keep || cls == PC::AnyType)
    return c;
  // (No override given, the usual case: nothing more to look up.)
  if (!nodePattern_ && fp16Ops_.empty() && fp32Ops_.empty())
    return c;
  bool overridable =
      e && (e->domain[0] == '\0' || std::string_view(e->domain) == kMpcDomain);
  if (nodePattern_ && nodePattern_->search(n.name())) {
    c.cls = PC::Fp32;
    c.source = ClassSource::Fp32Nodes;
  } else if (overridable && fp16Ops_.count(n.opType())) {
    c.cls = PC::Lower;
    c.source = ClassSource::Fp16Ops;
  } else if (overridable && fp32Ops_.count(n.opType())) {
    c.cls = PC::Fp32;
    c.source = ClassSource::Fp32Ops;
  }
  return c;
}

bool AutocastPolicy::castCommutes(const Node &n) const {
  const PolicyEntry *e = findPolicyEntry(n.domain(), n.opType());
  return e && e->castCommutes;
}

bool AutocastPolicy::isUncastInput(const Node &n, size_t i) const {
  const PolicyEntry *e = findPolicyEntry(n.domain(), n.opType());
  return e && e->isUncastInput(i);
}

} // namespace mpc
