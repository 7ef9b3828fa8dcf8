// Which graphs the CUDA backend takes, decided without a GPU.
//
// supports() reads a table (runtime/cuda/cuda_ops.cpp) and the graph's
// dtypes, so these run on any machine: every node of the compiled seed MLP,
// transformer, residual MLP and CNN (what tools/gpu-check.sh trains on the
// GPU) must be supported, and a node the device code does not take must be
// refused with a reason naming it.
#include "ir/builder.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "op_cases.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/evaluator.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

using namespace mpc;

namespace {

std::unique_ptr<Model> compiled(const std::string &name, DType precision,
                                const std::string &optimizer,
                                double maxGradNorm = 0) {
  auto model =
      loadModel(backend_ops::sourceDir() + "/models/" + name + ".onnx");
  CompileOptions o;
  o.precision = precision;
  o.optimizer = optimizer;
  o.momentum = optimizer == "sgd" ? 0.9 : 0.0;
  o.maxGradNorm = maxGradNorm;
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  return model;
}

/// Every node of the compiled step is supported; returns the op names.
std::set<std::string> expectAllSupported(const Model &model,
                                         const std::string &what) {
  std::set<std::string> ops;
  EXPECT_TRUE(model.training) << what;
  if (!model.training)
    return ops;
  for (const auto &n : model.training->algorithm->nodes()) {
    std::string why;
    EXPECT_TRUE(cudaBackendSupports(*n, why)) << what << ": " << why;
    ops.insert(n->domain().empty() ? n->opType()
                                   : n->domain() + "." + n->opType());
  }
  EXPECT_GT(model.training->algorithm->nodes().size(), 10u) << what;
  return ops;
}

TEST(CudaCoverage, EveryNodeOfTheCompiledSeedMlpIsSupported) {
  for (DType precision : {DType::F16, DType::BF16, DType::F32})
    for (const char *optimizer : {"adam", "adamw", "sgd"})
      expectAllSupported(*compiled("mlp_seed", precision, optimizer),
                         std::string("mlp_seed ") + dtypeName(precision) + " " +
                             optimizer);
}

// The transformer (erf GELU, which fuse-gelu makes one mpc.Gelu, and the
// opset-20 Gelu variant) and the residual MLP, as tools/gpu-check.sh
// compiles them, with and without gradient clipping: what this increment's
// device code is for. fold-transpose turns the MatMuls that read a
// Transpose into mpc.FusedMatMul; fold-widening-casts the attention's
// softmax island, with its scaling Div, into mpc.DivSoftmaxTo and its
// gradient into mpc.SoftmaxGradDiv.
TEST(CudaCoverage, EveryNodeOfTheTransformerAndResMlpStepsIsSupported) {
  std::set<std::string> ops;
  for (const char *model : {"transformer", "transformer_gelu20", "resmlp"})
    for (DType precision : {DType::F16, DType::BF16, DType::F32})
      for (double clip : {0.0, 1.0}) {
        std::string what = std::string(model) + " " + dtypeName(precision) +
                           " adam" + (clip ? " clip" : "");
        for (const std::string &op : expectAllSupported(
                 *compiled(model, precision, "adam", clip), what))
          ops.insert(op);
      }
  // The ops the device code of this increment exists for are really there.
  for (const char *op :
       {"mpc.DivSoftmaxTo", "mpc.SoftmaxGradDiv", "LayerNormalization",
        "mpc.LayerNormalizationTo", "mpc.LayerNormalizationGrad", "Gather",
        "mpc.GatherGrad", "Transpose", "mpc.Gelu", "Gelu", "mpc.GeluGrad",
        "mpc.FusedMatMul", "ReduceMean", "mpc.ReduceGrad", "mpc.ClipGradNorm",
        "mpc.AddTo"})
    EXPECT_TRUE(ops.count(op)) << op << " is not in any compiled step";
}

// The models made of torch.nn's own modules (models/make_torch_modules_
// models.py): nn.TransformerEncoderLayer under a causal mask, whose Mod and
// Trilu fold at compile time, and the CNN with GroupNorm and InstanceNorm2d,
// which the importer lowers to LayerNormalization (opset 17) or to
// ReduceMean arithmetic (opset 16), the MLP through the activations the
// importer lowers, the contrastive head through its reductions, and the
// encoder-decoder through its Resizes (Gathers), the einsum attention, and
// the unrolled LSTM and GRU.
TEST(CudaCoverage, EveryNodeOfTheTorchModuleStepsIsSupported) {
  std::set<std::string> ops;
  for (const char *model : {"encoder_layer", "norm_cnn", "norm_cnn_opset16",
                            "act_mlp", "reduce_head"})
    for (DType precision : {DType::F16, DType::BF16, DType::F32})
      for (const std::string &op :
           expectAllSupported(*compiled(model, precision, "adam"),
                              std::string(model) + " " + dtypeName(precision)))
        ops.insert(op);
  for (const char *op : {"LayerNormalization", "mpc.LayerNormalizationGrad",
                         "ReduceMean", "Sqrt", "Conv", "Sigmoid"})
    EXPECT_TRUE(ops.count(op)) << op << " is not in any compiled step";
}

// The model-library architectures (models/make_library_models.py): GPT-2's
// and LLaMA's steps once their masks and rotary angles fold, Swin's once
// its padding is lowered and its window mask folds, ConvNeXt's, and
// ConvNeXt's stochastic depth (RandomUniformLike on the device); and the
// dynamo exporter's GPT-2 (its SplitToSequence a Split, its CastLike mask
// folded), CNN (the batch norm back in training mode) and frozen-statistics
// net (models/make_dynamo_models.py).
TEST(CudaCoverage, EveryNodeOfTheLibraryModelStepsIsSupported) {
  std::set<std::string> ops;
  for (const char *model :
       {"gpt2_tiny", "llama_tiny", "swin_tiny", "convnext_tiny",
        "convnext_tiny_sd", "gpt2_tiny_dynamo", "cnn_dynamo",
        "frozen_norm_dynamo", "rmsnorm_dynamo", "gpt2_plain_dynamo",
        "attention_dynamo"})
    for (DType precision : {DType::F16, DType::BF16, DType::F32})
      for (const std::string &op :
           expectAllSupported(*compiled(model, precision, "adam"),
                              std::string(model) + " " + dtypeName(precision)))
        ops.insert(op);
  for (const char *op : {"RandomUniformLike", "Less", "Gather", "Concat"})
    EXPECT_TRUE(ops.count(op)) << op << " is not in any compiled step";
}

// The CNN (Conv, training-mode BatchNormalization, MaxPool and their
// gradients; tests/e2e/cnn_test.cpp) as tools/gpu-check.sh compiles it, and
// with SGD: every node on the device, the cuDNN and pooling ops included.
TEST(CudaCoverage, EveryNodeOfTheCnnStepIsSupported) {
  std::set<std::string> ops;
  for (DType precision : {DType::F16, DType::BF16, DType::F32})
    for (const char *optimizer : {"adam", "sgd"})
      for (const std::string &op : expectAllSupported(
               *compiled("cnn", precision, optimizer),
               std::string("cnn ") + dtypeName(precision) + " " + optimizer))
        ops.insert(op);
  for (const char *op :
       {"Conv", "mpc.ConvGradInput", "mpc.ConvGradWeight", "BatchNormalization",
        "mpc.BatchNormalizationGrad", "MaxPool", "mpc.MaxPoolGrad"})
    EXPECT_TRUE(ops.count(op)) << op << " is not in the compiled CNN step";
}

// The CNN with --data-parallel --sync-batchnorm: the statistics' ReduceSum,
// Shape arithmetic (a symbolic batch) and AllReduces, the batch norm in
// inference form on them, and its gradient with the statistics given.
TEST(CudaCoverage, EveryNodeOfTheSyncBatchNormCnnStepIsSupported) {
  for (DType precision : {DType::F16, DType::BF16, DType::F32}) {
    auto model = loadModel(backend_ops::sourceDir() + "/models/cnn.onnx");
    for (Value *in : model->graph->inputs())
      if (in->hasShape && !in->dims.empty())
        in->dims[0] = Dim::symbolic("batch");
    CompileOptions o;
    o.precision = precision;
    o.optimizer = "adam";
    o.dataParallel = o.syncBatchNorm = true;
    Statistics stats;
    runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
    std::set<std::string> ops = expectAllSupported(
        *model, std::string("cnn sync-batchnorm ") + dtypeName(precision));
    for (const char *op : {"mpc.AllReduce", "Shape", "Gather", "ReduceSum",
                           "BatchNormalization", "mpc.BatchNormalizationGrad"})
      EXPECT_TRUE(ops.count(op)) << op << " is not in the compiled step";
  }
}

// The optimizer's recipes on the device: --lr-schedule's mpc.LearningRate
// and the updates reading its rate (SGD and Adam, every schedule),
// --ema-decay's average, and --grad-accum's counters. Those counted with
// an int64 Add, which the device's Add does not take: a --grad-accum step
// could not run on cuda until they used mpc.IncrementStep.
TEST(CudaCoverage, EveryNodeOfTheOptimizerRecipesIsSupported) {
  for (const char *optimizer : {"sgd", "adamw"})
    for (const char *schedule :
         {"constant", "linear", "cosine", "cosine_with_restarts", "polynomial",
          "inverse_sqrt", "warmup_stable_decay", "step", "exponential"}) {
      auto model =
          loadModel(backend_ops::sourceDir() + "/models/mlp_seed.onnx");
      CompileOptions o;
      o.optimizer = optimizer;
      o.lrSchedule = schedule;
      o.warmupSteps = 10;
      o.emaDecay = 0.999;
      o.gradAccum = 2;
      const std::string s = schedule;
      if (s == "linear" || s == "cosine" || s == "cosine_with_restarts" ||
          s == "polynomial" || s == "warmup_stable_decay")
        o.totalSteps = 100;
      if (s == "warmup_stable_decay")
        o.lrDecaySteps = 20;
      if (std::string(schedule) == "step")
        o.lrStepSize = 10;
      Statistics stats;
      runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
      std::set<std::string> ops = expectAllSupported(
          *model, std::string("mlp_seed ") + optimizer + " " + schedule);
      EXPECT_TRUE(ops.count("mpc.LearningRate")) << schedule;
    }
}

// Every mpc-opt flag that changes the step, one at a time, on the
// transformer (attention, layer norm, GELU) and the CNN (batch norm): the
// cuda backend must take each step. A flag whose step it cannot run (as
// --grad-accum's int64 counter once was) fails here, without a GPU.
TEST(CudaCoverage, EveryStepChangingFlagGivesASupportedStep) {
  struct Variant {
    const char *what;
    std::function<void(CompileOptions &)> set;
  };
  const Variant variants[] = {
      {"--loss-scale=static:1024",
       [](CompileOptions &o) { o.lossScale = "static:1024"; }},
      {"--loss-scale=none", [](CompileOptions &o) { o.lossScale = "none"; }},
      {"--recompute=auto", [](CompileOptions &o) { o.recompute = "auto"; }},
      {"--fp16-ops=Softmax,Add",
       [](CompileOptions &o) {
         o.fp16Ops = {"Softmax", "Add"};
       }},
      {"--fp32-ops=MatMul,Gemm,Conv",
       [](CompileOptions &o) {
         o.fp32Ops = {"MatMul", "Gemm", "Conv"};
       }},
      {"--max-grad-norm=1 --grad-accum=3",
       [](CompileOptions &o) {
         o.maxGradNorm = 1;
         o.gradAccum = 3;
       }},
      {"--data-parallel --grad-comm-dtype=bf16 --grad-accum=2",
       [](CompileOptions &o) {
         o.dataParallel = true;
         o.gradCommDtype = "bf16";
         o.gradAccum = 2;
       }},
      {"--optimizer=sgd --nesterov --weight-decay --no-weight-decay",
       [](CompileOptions &o) {
         o.optimizer = "sgd";
         o.momentum = 0.9;
         o.nesterov = true;
         o.weightDecay = 1e-4;
         o.weightDecaySet = true;
         o.noWeightDecay = "bias";
       }},
      {"--optimizer=adafactor --weight-decay --no-weight-decay",
       [](CompileOptions &o) {
         o.optimizer = "adafactor";
         o.weightDecay = 1e-2;
         o.weightDecaySet = true;
         o.noWeightDecay = "bias";
       }},
      {"--optimizer=adafactor --grad-accum --max-grad-norm --lr-schedule",
       [](CompileOptions &o) {
         o.optimizer = "adafactor";
         o.gradAccum = 2;
         o.maxGradNorm = 1;
         o.lrSchedule = "linear";
         o.totalSteps = 10;
       }},
      {"--lr-schedule=polynomial --ema-decay",
       [](CompileOptions &o) {
         o.lrSchedule = "polynomial";
         o.totalSteps = 100;
         o.emaDecay = 0.999;
       }},
  };
  for (const char *model : {"transformer", "cnn"})
    for (const Variant &v : variants) {
      auto m =
          loadModel(backend_ops::sourceDir() + "/models/" + model + ".onnx");
      CompileOptions o;
      o.optimizer = "adamw";
      v.set(o);
      Statistics stats;
      runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
      expectAllSupported(*m, std::string(model) + " " + v.what);
    }
}

// mpc-run --eval-data's forward (runtime/evaluator.h: the main graph in
// inference form, fp32, batch norms on running statistics, Dropout the
// identity) runs on the cuda backend too.
TEST(CudaCoverage, EveryNodeOfTheValidationForwardIsSupported) {
  for (const char *name : {"transformer", "cnn", "encoder_layer", "gpt2_tiny",
                           "llama_tiny", "swin_tiny", "norm_cnn"}) {
    auto model =
        loadModel(backend_ops::sourceDir() + "/models/" + name + ".onnx");
    CompileOptions o;
    o.optimizer = "adamw";
    Statistics stats;
    runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
    auto cpu = createCpuBackend();
    Trainer t(std::move(model), *cpu);
    int64_t batch = 0;
    t.dataInputs(batch);
    Evaluator e(t, *cpu, batch);
    size_t nodes = 0;
    for (const auto &n : e.forward().nodes()) {
      std::string why;
      EXPECT_TRUE(cudaBackendSupports(*n, why)) << name << ": " << why;
      ++nodes;
    }
    EXPECT_GT(nodes, 3u) << name;
  }
}

// backend-ops' own coverage check, which skips without a GPU, run here
// too: every op with device code has a case for the first GPU session.
TEST(CudaCoverage, EveryDeviceOpHasABackendOpsCase) {
  std::set<std::string> covered;
  for (const backend_ops::OpCase &c : backend_ops::opCases())
    covered.insert(backend_ops::caseOpName(c));
  for (const std::string &op : cudaDeviceOps())
    EXPECT_TRUE(covered.count(op)) << op << " has no backend-ops case";
}

// Every backend-ops case, in every dtype, is a node the CUDA backend
// claims and the CPU reference runs: a case that is malformed fails here,
// not in the first GPU session's short time.
TEST(CudaCoverage, EveryBackendOpsCaseRunsOnTheCpu) {
  for (const backend_ops::OpCase &c : backend_ops::opCases())
    for (DType t : c.dtypes) {
      std::string what = c.name + " " + dtypeName(t);
      std::mt19937 rng(1);
      backend_ops::Inputs inputs = c.make(t, rng);
      Graph g;
      std::vector<const Tensor *> ptrs;
      Node *node = backend_ops::buildCaseNode(g, c, inputs, ptrs);
      std::string why;
      EXPECT_TRUE(cudaBackendSupports(*node, why)) << what << ": " << why;
      std::vector<Tensor> out;
      try {
        runCpuNode(*node, ptrs, out);
      } catch (const Error &e) {
        ADD_FAILURE() << what << ": " << e.what();
      }
    }
}

// GatherElements, the NLL loss, the extremum and slice gradients and ONNX's
// training operators have device code (run_gather_scatter.cpp,
// run_loss.cpp, run_reduction.cpp, run_shape_ops.cpp, run_optimizer.cpp):
// a model using them runs on --device=cuda. The device code refuses, with
// a reason, dtypes the CPU kernels do not take either or it does not.
TEST(CudaCoverage, GatherLossAndOptimizerOpsAreDeviceOps) {
  std::set<std::string> device;
  for (const std::string &op : cudaDeviceOps())
    device.insert(op);
  for (const char *op :
       {"GatherElements", "mpc.GatherElementsGrad", "NegativeLogLikelihoodLoss",
        "mpc.NegativeLogLikelihoodLossGrad", "mpc.ReduceExtremumGrad",
        "mpc.SliceGrad", "ai.onnx.preview.training.Adagrad",
        "ai.onnx.preview.training.Adam", "ai.onnx.preview.training.Momentum"})
    EXPECT_TRUE(device.count(op)) << op << " has no device code";

  Graph g;
  Builder b(g);
  std::string why;
  Value *h = g.addInput("h", DType::F16, toDims({4}));
  Value *r = g.addInput("r", DType::F32, toDims({}));
  Value *t = g.addInput("t", DType::I64, toDims({}));
  Node *adagrad = g.createNode("Adagrad", {r, t, h, h, h}, 2, "adagrad",
                               "ai.onnx.preview.training");
  EXPECT_FALSE(cudaBackendSupports(*adagrad, why));
  EXPECT_NE(why.find("fp32 or fp64"), std::string::npos) << why;
  Value *d = g.addInput("d", DType::F64, toDims({4}));
  Value *i = g.addInput("i", DType::I64, toDims({4}));
  Node *grad =
      g.createNode("GatherElementsGrad", {d, i, d}, 1, "grad", kMpcDomain);
  EXPECT_FALSE(cudaBackendSupports(*grad, why));
  EXPECT_NE(why.find("fp64"), std::string::npos) << why;
  Value *fi = g.addInput("fi", DType::F32, toDims({4}));
  EXPECT_FALSE(
      cudaBackendSupports(*b.op("GatherElements", {d, fi})->producer(), why));
  EXPECT_NE(why.find("indices must be int64 or int32"), std::string::npos)
      << why;
}

TEST(CudaCoverage, RefusesWhatTheDeviceCodeDoesNotTake) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput("x", DType::F32, toDims({4, 8}));
  Value *i = g.addInput("i", DType::I64, toDims({4}));
  std::string why;
  // An op with no kernel on any backend (Range has device code now:
  // run_shape_ops.cpp).
  EXPECT_FALSE(cudaBackendSupports(*b.op("Einsum", {x, x})->producer(), why));
  EXPECT_NE(why.find("no kernel for op Einsum"), std::string::npos) << why;
  // cuDNN's convolutions take 1 to 3 spatial dims; cuDNN's batch norm an
  // epsilon of at least CUDNN_BN_MIN_EPSILON.
  Value *x4 = g.addInput("x4", DType::F32, toDims({1, 1, 2, 2, 2, 2}));
  EXPECT_FALSE(cudaBackendSupports(*b.op("Conv", {x4, x4})->producer(), why));
  EXPECT_NE(why.find("1 to 3 spatial dims"), std::string::npos) << why;
  EXPECT_FALSE(cudaBackendSupports(
      *b.op("MaxPool", {x4},
            {{"kernel_shape", Attribute::ofInts({1, 1, 1, 1})}})
           ->producer(),
      why));
  EXPECT_NE(why.find("1 to 3 spatial dims"), std::string::npos) << why;
  Value *c = g.addInput("c", DType::F32, toDims({8}));
  EXPECT_FALSE(
      cudaBackendSupports(*b.op("BatchNormalization", {x, c, c, c, c},
                                {{"epsilon", Attribute::ofFloat(-1.0f)}})
                               ->producer(),
                          why));
  EXPECT_NE(why.find("epsilon"), std::string::npos) << why;
  Value *d = g.addInput("d", DType::F64, toDims({4, 8}));
  EXPECT_FALSE(cudaBackendSupports(*b.op("Softmax", {d})->producer(), why));
  EXPECT_NE(why.find("fp64"), std::string::npos) << why;
  Value *fi = g.addInput("fi", DType::F32, toDims({4}));
  EXPECT_FALSE(cudaBackendSupports(*b.op("Gather", {x, fi})->producer(), why));
  EXPECT_NE(why.find("indices must be int64 or int32"), std::string::npos)
      << why;
  EXPECT_FALSE(cudaBackendSupports(*b.op("Add", {i, i})->producer(), why));
  EXPECT_NE(why.find("int64"), std::string::npos) << why;
  // Integers convert to fp32 only (counts read from shapes).
  EXPECT_TRUE(cudaBackendSupports(*b.cast(i, DType::F32)->producer(), why))
      << why;
  Value *ci = b.cast(i, DType::F16);
  EXPECT_FALSE(cudaBackendSupports(*ci->producer(), why));
  EXPECT_NE(why.find("int64 to fp16"), std::string::npos) << why;
  // Clip, Max, Min and Sum take the CPU's numeric dtypes, not bool;
  // LeakyRelu and the gradients fp32, fp16 and bf16; Not takes bool;
  // CastLike converts what Cast converts.
  EXPECT_TRUE(cudaBackendSupports(*b.op("Clip", {i})->producer(), why)) << why;
  EXPECT_TRUE(cudaBackendSupports(*b.op("Max", {d, d})->producer(), why))
      << why;
  Value *flag = g.addInput("flag", DType::Bool, toDims({4}));
  EXPECT_FALSE(cudaBackendSupports(*b.op("Sum", {flag})->producer(), why));
  EXPECT_NE(why.find("bool"), std::string::npos) << why;
  EXPECT_FALSE(cudaBackendSupports(*b.op("LeakyRelu", {i})->producer(), why));
  EXPECT_NE(why.find("int64"), std::string::npos) << why;
  EXPECT_FALSE(
      cudaBackendSupports(*b.mpcOp("LeakyReluGrad", {d, d})->producer(), why));
  EXPECT_NE(why.find("fp64"), std::string::npos) << why;
  EXPECT_FALSE(cudaBackendSupports(*b.op("Not", {x})->producer(), why));
  EXPECT_NE(why.find("bool"), std::string::npos) << why;
  EXPECT_FALSE(
      cudaBackendSupports(*b.op("CastLike", {i, ci})->producer(), why));
  EXPECT_NE(why.find("int64 to fp16"), std::string::npos) << why;
  EXPECT_TRUE(cudaBackendSupports(*b.op("Relu", {x})->producer(), why)) << why;
  EXPECT_TRUE(cudaBackendSupports(*b.op("Shape", {i})->producer(), why)) << why;
  // The norms' To forms write Y in fp32, fp16 or bf16 and Ylow in fp16 or
  // bf16; their shape rule takes any float type for either.
  auto normTo = [&](const char *op, DType to, DType low, bool withLow) {
    std::vector<Value *> in = {x, c};
    if (std::string(op) == "LayerNormalizationTo")
      in.push_back(c);
    const size_t outs = std::string(op) == "LayerNormalizationTo" ? 4 : 2;
    Node *n = b.node(op, in, outs,
                     {{"to", Attribute::ofInt(toOnnxDataType(to))},
                      {"low", Attribute::ofInt(toOnnxDataType(low))}},
                     "", kMpcDomain);
    if (!withLow)
      n->omitOutput(outs - 1);
    return n;
  };
  for (const char *op : {"LayerNormalizationTo", "RMSNormalizationTo"}) {
    EXPECT_TRUE(
        cudaBackendSupports(*normTo(op, DType::F32, DType::BF16, true), why))
        << op << ": " << why;
    EXPECT_TRUE(
        cudaBackendSupports(*normTo(op, DType::F16, DType::F64, false), why))
        << op << ": " << why;
    EXPECT_FALSE(
        cudaBackendSupports(*normTo(op, DType::F64, DType::F16, false), why))
        << op;
    EXPECT_NE(why.find("writes Y in fp32, fp16 or bf16"), std::string::npos)
        << op << ": " << why;
    EXPECT_FALSE(
        cudaBackendSupports(*normTo(op, DType::F32, DType::F32, true), why))
        << op;
    EXPECT_NE(why.find("writes Ylow in fp16 or bf16"), std::string::npos)
        << op << ": " << why;
  }
}

// The ops issue 4 gave device code after the first families: they must
// stay device ops (a regression to "no kernel" would otherwise only show
// as a model failing on --device=cuda).
TEST(CudaCoverage, PiecewiseNotCastLikeAndRangeAreDeviceOps) {
  std::vector<std::string> device = cudaDeviceOps();
  std::set<std::string> ops(device.begin(), device.end());
  for (const char *op :
       {"CastLike", "Clip", "mpc.ClipGrad", "LeakyRelu", "mpc.LeakyReluGrad",
        "Max", "Min", "Sum", "mpc.ExtremumGrad", "Not", "Range", "Trilu"})
    EXPECT_TRUE(ops.count(op)) << op << " has no device code";
}

TEST(CudaCoverage, NoBackendSaysWhy) {
  std::string why;
  std::unique_ptr<Backend> b = createCudaBackend(why);
  if (b)
    EXPECT_EQ(b->name(), "cuda");
  else
    EXPECT_FALSE(why.empty());
}

} // namespace
