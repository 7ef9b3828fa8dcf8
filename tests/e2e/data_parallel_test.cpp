// End to end: data parallelism (mpc-opt --data-parallel, passes/
// data_parallel.h) over an in-process world of threads
// (tests/support/thread_world.h), each thread a rank with its own Trainer
// and CPU backend, as mpc-run under mpirun runs them.
//
// N ranks of B samples must train like one process on the N*B batch made of
// the same samples (fp32, to rounding): same logged loss at every step, same
// parameters after it; with SGD (momentum), Adam with clipping, dynamic loss
// scaling, and --grad-accum; batch norms with --sync-batchnorm (statistics
// included). Every rank must hold the same bits of every
// state after every step. An overflow on one rank skips the step on all of
// them; ranks that disagree on the step are refused before it; rank 0's
// state is every rank's at the start.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/predictor.h"
#include "runtime/state_dict.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"
#include "tests/e2e/batch_split.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace mpc;
using test::bytesOf;
using test::compileForBatch;
using test::fp32Options;
using test::relativeDifference;

namespace {

const std::string &kModels = test::modelsDir();

using State = std::map<std::string, Tensor>;

struct RankRun {
  std::vector<StepRecord> steps;
  std::vector<State> state; ///< every state value after each step
};

/// Every state value of a trainer.
State stateOf(const Trainer &t) {
  State s;
  for (const Value *v : t.model().training->algorithm->initializers())
    if (v->isState)
      s[v->name()] = t.state(v->name());
  return s;
}

/// `steps` optimizer steps on `ranks` ranks (ranks == 1: one process, no
/// world) of `batch` samples; rank r's micro-batch j of step s is batch
/// (s*K + j)*ranks + r, as mpc-run takes them.
std::vector<RankRun> train(const std::string &file, const std::string &data,
                           CompileOptions o, int ranks, int64_t batch,
                           int64_t steps) {
  o.dataParallel = ranks > 1;
  // One process is the reference: the plain batch norm over the whole batch.
  o.syncBatchNorm = o.syncBatchNorm && ranks > 1;
  std::vector<RankRun> runs(static_cast<size_t>(ranks));
  test::ThreadWorld world(ranks);
  world.run([&](int r) {
    auto backend = createCpuBackend();
    Trainer t(compileForBatch(file, o, batch), *backend,
              ranks > 1 ? &world.rank(r) : nullptr);
    int64_t b = batch;
    Dataset d = Dataset::fromNpz(kModels + data, t.dataInputs(b));
    t.synchronizeRanks(batch);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<Trainer::Batch> micro;
      for (int64_t j = 0; j < t.microBatches(); ++j)
        micro.push_back(
            d.batch((s * t.microBatches() + j) * ranks + r, batch, false, 0));
      runs[size_t(r)].steps.push_back(t.optimizerStep(micro));
      runs[size_t(r)].state.push_back(stateOf(t));
    }
  });
  return runs;
}

/// N ranks of B follow one process of N*B; every rank holds the same bits.
/// `noise`: a parameter whose gradient is rounding noise (not compared).
void expectRanksMatchTheBigBatch(const std::string &file,
                                 const std::string &data, CompileOptions o,
                                 int ranks, int64_t batch,
                                 const std::string &noise = "") {
  const int64_t steps = 4;
  const int64_t k = o.gradAccum;
  std::vector<RankRun> dp = train(file, data, o, ranks, batch, steps);
  o.gradAccum = 1;
  RankRun one = train(file, data, o, 1, batch * ranks * k, steps)[0];
  const RankRun &lead = dp[0];
  for (int64_t s = 0; s < steps; ++s) {
    const StepRecord &a = lead.steps[size_t(s)], &b = one.steps[size_t(s)];
    EXPECT_FALSE(a.skipped) << "step " << s + 1;
    EXPECT_EQ(a.lossScale, b.lossScale) << "step " << s + 1;
    EXPECT_LT(std::fabs(a.loss - b.loss), 2e-6 * std::fabs(b.loss))
        << file << " step " << s + 1 << ": " << a.loss << " vs " << b.loss;
    // With clipping: the norm of the averaged gradients, the big batch's.
    ASSERT_EQ(a.gradNorm.has_value(), o.maxGradNorm > 0) << "step " << s + 1;
    ASSERT_EQ(b.gradNorm.has_value(), o.maxGradNorm > 0) << "step " << s + 1;
    if (a.gradNorm)
      EXPECT_LT(std::fabs(*a.gradNorm - *b.gradNorm), 1e-5 * *b.gradNorm)
          << file << " step " << s + 1 << ": grad norm " << *a.gradNorm
          << " vs " << *b.gradNorm;
    for (int r = 1; r < ranks; ++r) {
      EXPECT_EQ(dp[size_t(r)].steps[size_t(s)].loss, a.loss)
          << "rank " << r << " logs another loss at step " << s + 1;
      EXPECT_EQ(dp[size_t(r)].steps[size_t(s)].gradNorm, a.gradNorm)
          << "rank " << r << " logs another grad norm at step " << s + 1;
      for (const auto &[name, value] : lead.state[size_t(s)])
        ASSERT_EQ(bytesOf(dp[size_t(r)].state[size_t(s)].at(name)),
                  bytesOf(value))
            << "rank " << r << "'s '" << name << "' parted from rank 0's "
            << "after step " << s + 1;
    }
  }
  o.syncBatchNorm = false; // needs --data-parallel; the same parameters
  std::vector<std::string> params =
      splitList(*compileForBatch(file, o, 1)->meta("mpc.params"));
  for (const std::string &name : params) {
    if (name == noise)
      continue;
    const Tensor &got = lead.state.back().at(name),
                 &want = one.state.back().at(name);
    EXPECT_LT(relativeDifference(got, want), 1e-5)
        << file << " '" << name << "' after " << steps << " steps";
    // The run moved: equality is not that of two untouched models.
    EXPECT_GT(relativeDifference(got, one.state.front().at(name)), 0) << name;
  }
}

} // namespace

TEST(DataParallel, MlpSgdOnTwoRanksMatchesTheBigBatch) {
  expectRanksMatchTheBigBatch("mlp_seed.onnx", "mlp_seed_data.npz",
                              fp32Options("sgd"), 2, 32);
}

TEST(DataParallel, MlpSgdWithClippingOnFourRanksMatchesTheBigBatch) {
  // The clip's norm is the global batch's: it reads the averaged gradients.
  // At 0.3 the 64-sample batch's gradient is clipped from step 2 on (one
  // process's loss log with and without --max-grad-norm=0.3 parts there);
  // a clip of each rank's own gradients would not follow it. (SGD, not
  // Adam, whose update barely sees a gradient's scale.)
  CompileOptions o = fp32Options("sgd");
  o.maxGradNorm = 0.3;
  expectRanksMatchTheBigBatch("mlp_seed.onnx", "mlp_seed_data.npz", o, 4, 16);
}

TEST(DataParallel, MlpWithClippingAndGradAccumMatchesTheBigBatch) {
  // The gradients cross ranks at the window's end only: the norm logged
  // is the K-th run's, of the ranks' averaged sums, the same on every rank.
  CompileOptions o = fp32Options("sgd");
  o.maxGradNorm = 0.3;
  o.gradAccum = 2;
  expectRanksMatchTheBigBatch("mlp_seed.onnx", "mlp_seed_data.npz", o, 2, 16);
}

TEST(DataParallel, MlpWithDynamicLossScaleAndGradAccumMatchesTheBigBatch) {
  // Each rank sums K = 3 micro-batches, then the ranks average the sums.
  CompileOptions o = fp32Options("sgd");
  o.lossScale = "dynamic";
  o.gradAccum = 3;
  expectRanksMatchTheBigBatch("mlp_seed.onnx", "mlp_seed_data.npz", o, 2, 8);
}

TEST(DataParallel, WithGradAccumTheRanksCommunicateOncePerWindow) {
  // K = 3 micro-batches per optimizer step: the reductions are gated by
  // the window's boundary, so the gradients and the flag cross ranks once
  // per optimizer step (DDP's no_sync), not once per micro-batch.
  CompileOptions o = fp32Options("sgd");
  o.lossScale = "dynamic";
  o.gradAccum = 3;
  o.dataParallel = true;
  test::ThreadWorld world(2);
  world.run([&](int r) {
    auto backend = createCpuBackend();
    Trainer t(compileForBatch("mlp_seed.onnx", o, 8), *backend, &world.rank(r));
    int64_t batch = 8;
    Dataset d =
        Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
    t.synchronizeRanks(batch);
    for (int64_t s = 0; s < 4; ++s) {
      std::vector<Trainer::Batch> micro;
      for (int64_t j = 0; j < 3; ++j)
        micro.push_back(d.batch((s * 3 + j) * 2 + r, 8, false, 0));
      ASSERT_FALSE(t.optimizerStep(micro).skipped);
    }
  });
  // 4 windows x 2 reductions (gradients, found_inf) x 2 ranks.
  EXPECT_EQ(world.allToAllCalls(), 16);
}

TEST(DataParallel, MlpWithGradAccumAndNoLossScaleMatchesTheBigBatch) {
  // Unscaled, the accumulated sums are the gradients themselves: the
  // reduction goes after the last sum, the buffers keep each rank's own.
  CompileOptions o = fp32Options("sgd");
  o.gradAccum = 2;
  expectRanksMatchTheBigBatch("mlp_seed.onnx", "mlp_seed_data.npz", o, 3, 8);
}

TEST(DataParallel, TransformerAdamOnTwoRanksMatchesTheBigBatch) {
  // The attention's key bias adds q.b to every score of a row, which
  // softmax ignores: its gradient is rounding noise.
  expectRanksMatchTheBigBatch("transformer_dynbatch.onnx",
                              "transformer_data.npz", fp32Options("adam"), 2, 2,
                              "attn.k.bias");
}

TEST(DataParallel, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  CompileOptions o = fp32Options("adam");
  o.precision = DType::F16; // dynamic loss scaling from 65536
  o.lr = 1e-2;
  o.dataParallel = true;
  test::ThreadWorld world(2);
  std::vector<State> before(2u), after(2u);
  std::vector<StepRecord> bad(2u), next(2u);
  world.run([&](int r) {
    auto backend = createCpuBackend();
    Trainer t(compileForBatch("mlp_seed.onnx", o, 16), *backend,
              &world.rank(r));
    int64_t batch = 16;
    Dataset d =
        Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
    t.synchronizeRanks(batch);
    ASSERT_FALSE(t.optimizerStep({d.batch(r, 16, false, 0)}).skipped);
    before[size_t(r)] = stateOf(t);
    // Only rank 1's batch overflows fp16 in the forward.
    Trainer::Batch b = d.batch(2 + r, 16, false, 0);
    if (r == 1)
      b[0].second.data<float>()[0] = 1e6f;
    bad[size_t(r)] = t.optimizerStep({b});
    after[size_t(r)] = stateOf(t);
    next[size_t(r)] = t.optimizerStep({d.batch(4 + r, 16, false, 0)});
  });
  const std::string scale = "loss_scale";
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(bad[size_t(r)].skipped) << "rank " << r << " did not skip";
    for (const auto &[name, value] : before[size_t(r)]) {
      if (name == scale || name.find("growth_tracker") != std::string::npos)
        continue;
      EXPECT_EQ(bytesOf(after[size_t(r)].at(name)), bytesOf(value))
          << "rank " << r << ": '" << name << "' changed in a skipped step";
    }
    EXPECT_EQ(after[size_t(r)].at(scale).getAsDouble(0), 32768)
        << "rank " << r << " did not back its scale off";
    EXPECT_FALSE(next[size_t(r)].skipped);
    EXPECT_EQ(next[size_t(r)].lossScale, 32768);
  }
}

TEST(DataParallel, RanksThatDisagreeOnTheStepAreRefusedOnEveryRank) {
  CompileOptions o = fp32Options("sgd");
  o.dataParallel = true;
  test::ThreadWorld world(2);
  std::vector<std::string> errors(2u);
  world.run([&](int r) {
    auto backend = createCpuBackend();
    const int64_t batch = r == 0 ? 16 : 8; // rank 1 was given another --batch
    Trainer t(compileForBatch("mlp_seed.onnx", o, batch), *backend,
              &world.rank(r));
    try {
      t.synchronizeRanks(batch);
    } catch (const Error &e) {
      errors[size_t(r)] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[size_t(r)].find("rank 1 runs another step than rank 0"),
              std::string::npos)
        << "rank " << r << ": '" << errors[size_t(r)] << "'";
  }
}

TEST(DataParallel, EveryRankStartsFromRankZerosState) {
  CompileOptions o = fp32Options("sgd");
  o.dataParallel = true;
  test::ThreadWorld world(3);
  std::vector<std::vector<uint8_t>> weights(3u);
  std::vector<uint8_t> rank0;
  world.run([&](int r) {
    auto backend = createCpuBackend();
    auto model = compileForBatch("mlp_seed.onnx", o, 16);
    Trainer t(std::move(model), *backend, &world.rank(r));
    Tensor w = t.state("fc1.weight");
    // A rank whose file held other initial weights.
    if (r != 0)
      for (int64_t i = 0; i < w.numel(); ++i)
        w.setFromDouble(i, double(r));
    else
      rank0 = bytesOf(w);
    const_cast<Executor &>(t.executor()).setInitializer("fc1.weight", w);
    t.synchronizeRanks(16);
    weights[size_t(r)] = bytesOf(t.state("fc1.weight"));
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(weights[size_t(r)], rank0) << "rank " << r;
}

TEST(DataParallel, ShardedMastersStartFromRankZerosWeights) {
  // --shard-optimizer: each rank keeps a chunk of every fp32 master; a rank
  // whose chunk was another (its file held other weights) starts from rank
  // 0's, as the unsharded step's ranks do.
  CompileOptions o = fp32Options("sgd");
  o.dataParallel = true;
  o.shardOptimizer = true;
  o.worldSize = 3;
  test::ThreadWorld world(3);
  std::vector<std::vector<uint8_t>> weights(3u);
  std::vector<uint8_t> rank0;
  world.run([&](int r) {
    auto backend = createCpuBackend();
    auto model = compileForBatch("mlp_seed.onnx", o, 16);
    Trainer t(std::move(model), *backend, &world.rank(r));
    Tensor whole = t.wholeState("fc1.weight"); // every rank gathers
    EXPECT_EQ(whole.dims, (std::vector<int64_t>{20, 10}));
    Tensor chunk = t.state("fc1.weight");
    EXPECT_EQ(chunk.dims, (std::vector<int64_t>{67})); // ceil(200 / 3)
    if (r != 0)
      for (int64_t i = 0; i < chunk.numel(); ++i)
        chunk.setFromDouble(i, double(r));
    else
      rank0 = bytesOf(whole);
    const_cast<Executor &>(t.executor()).setInitializer("fc1.weight", chunk);
    t.synchronizeRanks(16);
    weights[size_t(r)] = bytesOf(t.wholeState("fc1.weight"));
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(weights[size_t(r)], rank0) << "rank " << r;
}

TEST(DataParallel, ShardedMastersCompiledInMemoryTrainAsUnsharded) {
  // A model compiled in memory (as Python's mpc.compile does) holds rank
  // 0's chunk in its step: every rank still cuts its own from the whole
  // weight, and 2 ranks log and hold the unsharded run's bits; on one rank
  // the state_dict and the predictions are the unsharded ones.
  CompileOptions o = fp32Options("adamw");
  o.precision = DType::F16;
  o.lossScale = "dynamic";
  o.lr = 1e-2;
  o.maxGradNorm = 0.5;
  o.dataParallel = true;
  const std::vector<std::string> params = {"fc1.weight", "fc1.bias",
                                           "fc2.weight", "fc2.bias"};
  for (int ranks : {1, 2}) {
    std::vector<std::vector<double>> losses(2u);
    std::vector<std::map<std::string, std::vector<uint8_t>>> whole(2u);
    std::vector<std::vector<uint8_t>> predicted(2u), dict(2u);
    for (int sharded : {0, 1}) {
      CompileOptions c = o;
      c.shardOptimizer = sharded;
      c.worldSize = sharded ? ranks : 0;
      test::ThreadWorld world(ranks);
      world.run([&](int r) {
        auto backend = createCpuBackend();
        Trainer t(compileForBatch("mlp_seed.onnx", c, 16), *backend,
                  ranks > 1 ? &world.rank(r) : nullptr);
        int64_t batch = 16;
        Dataset d = Dataset::fromNpz(kModels + "mlp_seed_data.npz",
                                     t.dataInputs(batch));
        t.synchronizeRanks(batch);
        for (int64_t s = 0; s < 5; ++s) {
          double loss =
              t.optimizerStep({d.batch(s * ranks + r, 16, false, 0)}).loss;
          if (r == 0)
            losses[size_t(sharded)].push_back(loss);
        }
        for (const std::string &p : params) {
          Tensor w = t.wholeState(p); // every rank gathers
          if (r == 0)
            whole[size_t(sharded)][p] = bytesOf(w);
        }
        if (ranks > 1)
          return;
        for (const StateDictEntry &e : t.stateDict()) {
          std::vector<uint8_t> b = bytesOf(e.value);
          dict[size_t(sharded)].insert(dict[size_t(sharded)].end(), b.begin(),
                                       b.end());
        }
        Predictor predict(*backend, {});
        Trainer::Batch x = d.batch(0, 16, false, 0);
        std::vector<InferenceInput> in;
        for (auto &[name, value] : x)
          if (name == "x")
            in.push_back({name, value, ""});
        for (const InferenceOutput &out : predict.run(t, in))
          predicted[size_t(sharded)] = bytesOf(out.value);
      });
    }
    ASSERT_EQ(losses[0].size(), 5u);
    for (size_t s = 0; s < 5; ++s)
      EXPECT_EQ(losses[1][s], losses[0][s]) << ranks << " ranks, step " << s;
    for (const std::string &p : params) {
      EXPECT_FALSE(whole[0][p].empty()) << p;
      EXPECT_EQ(whole[1][p], whole[0][p]) << ranks << " ranks, " << p;
    }
    EXPECT_EQ(dict[1], dict[0]) << ranks << " ranks";
    EXPECT_EQ(predicted[1], predicted[0]) << ranks << " ranks";
    if (ranks == 1)
      EXPECT_FALSE(predicted[0].empty());
  }
}

namespace {

/// The largest relative distance, after the last step, between rank 0's
/// value of each of `names` and one process's.
double farthest(const RankRun &ranks, const RankRun &one,
                const std::vector<std::string> &names) {
  double d = 0;
  for (const std::string &name : names)
    d = std::max(d, relativeDifference(ranks.state.back().at(name),
                                       one.state.back().at(name)));
  return d;
}

const std::vector<std::string> kCnnNormStats = {"bn.running_mean",
                                                "bn.running_var"};

} // namespace

TEST(DataParallel, CnnWithSyncBatchNormOnTwoRanksMatchesTheBigBatch) {
  // --sync-batchnorm: the batch norm normalises with the statistics of
  // both ranks' samples, so the ranks follow one process of 8, parameters
  // (SGD with momentum: the gradients themselves) and running statistics
  // (the unbiased variance over the 2 x 4 x 16 x 16 values of a channel).
  CompileOptions o = fp32Options("sgd");
  o.syncBatchNorm = true;
  expectRanksMatchTheBigBatch("cnn.onnx", "cnn_data.npz", o, 2, 4);
  std::vector<RankRun> dp = train("cnn.onnx", "cnn_data.npz", o, 2, 4, 4);
  RankRun one = train("cnn.onnx", "cnn_data.npz", o, 1, 8, 4)[0];
  EXPECT_LT(farthest(dp[0], one, kCnnNormStats), 1e-6);
  EXPECT_GT(relativeDifference(dp[0].state.back().at("bn.running_var"),
                               dp[0].state.front().at("bn.running_var")),
            0);
}

TEST(DataParallel, CnnWithSyncBatchNormAndAdamOnFourRanksMatchesTheBigBatch) {
  // 4 ranks of 2 samples: each rank's own statistics would be those of 2
  // images; the global ones are the 8's. The batch norm takes out the
  // mean conv1's bias adds, so that bias's gradient is rounding noise,
  // which Adam scales up to whole steps.
  CompileOptions o = fp32Options("adam");
  o.syncBatchNorm = true;
  expectRanksMatchTheBigBatch("cnn.onnx", "cnn_data.npz", o, 4, 2,
                              "conv1.bias");
}

TEST(DataParallel, CnnWithoutSyncBatchNormPartsFromTheBigBatch) {
  // What --sync-batchnorm is for: with per-rank statistics the same run
  // ends elsewhere, far beyond the tolerance the tests above hold.
  CompileOptions o = fp32Options("sgd");
  std::vector<RankRun> dp = train("cnn.onnx", "cnn_data.npz", o, 2, 4, 4);
  RankRun one = train("cnn.onnx", "cnn_data.npz", o, 1, 8, 4)[0];
  EXPECT_GT(farthest(dp[0], one, kCnnNormStats), 1e-3);
  EXPECT_GT(farthest(dp[0], one, {"conv1.weight", "bn.weight"}), 1e-4);
}

TEST(DataParallel, SyncBatchNormInMixedPrecisionMatchesTheBigBatch) {
  // fp16 convolutions, the statistics and their reductions in fp32 (the
  // autocast policy's island); static scale 1024, which neither the ranks'
  // nor the whole batch's fp16 gradients overflow.
  CompileOptions o = fp32Options("sgd");
  o.precision = DType::F16;
  o.lossScale = "static:1024";
  o.syncBatchNorm = true;
  std::vector<RankRun> dp = train("cnn.onnx", "cnn_data.npz", o, 2, 4, 4);
  RankRun one = train("cnn.onnx", "cnn_data.npz", o, 1, 8, 4)[0];
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_FALSE(dp[0].steps[size_t(s)].skipped);
    EXPECT_LT(
        std::fabs(dp[0].steps[size_t(s)].loss - one.steps[size_t(s)].loss),
        1e-3 * std::fabs(one.steps[size_t(s)].loss))
        << "step " << s + 1;
  }
  // fp16 rounding of the activations is per sample, the same in both runs;
  // what differs is the order of fp32 sums.
  EXPECT_LT(farthest(dp[0], one, kCnnNormStats), 1e-4);
  EXPECT_LT(farthest(dp[0], one, {"conv1.weight", "bn.weight", "fc.weight"}),
            1e-3);
}

TEST(DataParallel, Bf16GradientCommunicationFollowsTheFp32Run) {
  // --grad-comm-dtype=bf16 (DDP's bf16 compression hook): the gradients
  // cross ranks as bf16, half the bytes. The run follows the fp32
  // communication's to bf16's precision, and differs from it (the rounding
  // happened); every rank still holds the same bits.
  CompileOptions o = fp32Options("sgd");
  std::vector<RankRun> fp32 =
      train("mlp_seed.onnx", "mlp_seed_data.npz", o, 2, 16, 4);
  o.gradCommDtype = "bf16";
  std::vector<RankRun> bf16 =
      train("mlp_seed.onnx", "mlp_seed_data.npz", o, 2, 16, 4);
  for (int64_t s = 0; s < 4; ++s) {
    double a = bf16[0].steps[size_t(s)].loss, b = fp32[0].steps[size_t(s)].loss;
    EXPECT_LT(std::fabs(a - b), 1e-3 * std::fabs(b)) << "step " << s + 1;
    for (const auto &[name, value] : bf16[0].state[size_t(s)])
      ASSERT_EQ(bytesOf(bf16[1].state[size_t(s)].at(name)), bytesOf(value))
          << name;
  }
  std::vector<std::string> params =
      splitList(*compileForBatch("mlp_seed.onnx", fp32Options("sgd"), 1)
                     ->meta("mpc.params"));
  double farthest = 0;
  for (const std::string &name : params) {
    double d = relativeDifference(bf16[0].state.back().at(name),
                                  fp32[0].state.back().at(name));
    EXPECT_LT(d, 1e-2) << name;
    farthest = std::max(farthest, d);
  }
  EXPECT_GT(farthest, 1e-7) << "the bf16 wire rounded nothing";
}
