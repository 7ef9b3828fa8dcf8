// mpc.AllGather's shape form, AllGather(s1..sn) <world_size, shapes>, which
// gathers --shard-optimizer's fp32 master weights (kept only as chunks) at
// the start of the step: every rank gets the whole values, bit for bit, in
// the dims `shapes` names; a list that does not parse is one line naming
// the node.
#include "ir/mpc_ops.h"
#include "kernels/common/shard_rule.h"
#include "kernels/cpu/cpu_util.h"
#include "support/diagnostics.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace mpc;

namespace {

/// Rank r's chunk of `whole` over `ranks` ranks (zero padded), as the
/// runtime cuts a master on loading.
Tensor chunkOf(const Tensor &whole, int ranks, int r) {
  const int64_t c = shardChunk(whole.numel(), ranks);
  Tensor t = Tensor::zeros(whole.dtype, {c});
  const int64_t fill =
      std::max<int64_t>(0, std::min(c, whole.numel() - int64_t(r) * c));
  const size_t size = dtypeSize(whole.dtype);
  if (fill)
    std::memcpy(t.bytes.data(), whole.bytes.data() + size_t(r * c) * size,
                size_t(fill) * size);
  return t;
}

/// Runs AllGather<world_size, shapes>(chunks) on every rank; chunks[r] are
/// rank r's. Returns each rank's outputs.
std::vector<std::vector<Tensor>>
gather(test::ThreadWorld &world, const std::vector<int64_t> &shapes,
       const std::vector<std::vector<Tensor>> &chunks, size_t outputs) {
  std::vector<std::vector<Tensor>> out(size_t(world.size()),
                                       std::vector<Tensor>(outputs));
  world.run([&](int r) {
    Graph g;
    std::vector<Value *> vals;
    for (size_t i = 0; i < chunks[0].size(); ++i)
      vals.push_back(
          g.addInput("s" + std::to_string(i), chunks[0][i].dtype, {}));
    Node *node =
        g.createNode("AllGather", vals, outputs, "all_gather", kMpcDomain);
    node->setAttr("world_size", Attribute::ofInt(world.size()));
    node->setAttr("shapes", Attribute::ofInts(shapes));
    KernelContext ctx{*node};
    for (size_t i = 0; i < chunks[0].size(); ++i)
      ctx.inputs.push_back(&chunks[size_t(r)][i]);
    for (size_t i = 0; i < outputs; ++i)
      ctx.outputs.push_back(&out[size_t(r)][i]);
    ctx.collective = &world.rank(r);
    (*findCpuKernel(kMpcDomain, "AllGather"))(ctx);
  });
  return out;
}

std::vector<uint8_t> bytesOf(const Tensor &t) {
  return std::vector<uint8_t>(t.bytes.data(), t.bytes.data() + t.byteSize());
}

} // namespace

TEST(AllGatherShapes, EveryRankGetsTheWholeMastersBitForBit) {
  // Sizes whose chunks end inside a value and a value smaller than the
  // world (a 2-element bias over 3 and 5 ranks: some chunks are padding).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const std::vector<std::vector<int64_t>> dims = {{7, 5}, {2}, {3, 1, 4}};
  for (int ranks : {1, 2, 3, 5}) {
    std::vector<Tensor> whole;
    std::vector<int64_t> shapes;
    for (const auto &d : dims) {
      Tensor t(DType::F32, d);
      for (int64_t k = 0; k < t.numel(); ++k)
        t.setFromDouble(k, u(rng));
      whole.push_back(t);
      shapes.push_back(int64_t(d.size()));
      shapes.insert(shapes.end(), d.begin(), d.end());
    }
    std::vector<std::vector<Tensor>> chunks(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r)
      for (const Tensor &t : whole)
        chunks[size_t(r)].push_back(chunkOf(t, ranks, r));
    test::ThreadWorld world(ranks);
    auto out = gather(world, shapes, chunks, dims.size());
    for (int r = 0; r < ranks; ++r)
      for (size_t i = 0; i < dims.size(); ++i) {
        EXPECT_EQ(out[size_t(r)][i].dims, dims[i]) << ranks << " ranks";
        EXPECT_EQ(bytesOf(out[size_t(r)][i]), bytesOf(whole[i]))
            << ranks << " ranks, rank " << r << ", value " << i;
      }
  }
}

TEST(AllGatherShapes, AListThatDoesNotParseIsOneLineNamingTheNode) {
  test::ThreadWorld world(1);
  std::vector<std::vector<Tensor>> chunks = {{Tensor::zeros(DType::F32, {6})}};
  for (const std::vector<int64_t> &bad :
       std::vector<std::vector<int64_t>>{{2, 2}, {2, 2, 3, 9}, {1, -6}, {}}) {
    try {
      gather(world, bad, chunks, 1);
      ADD_FAILURE() << "accepted a bad shapes list";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("all_gather"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("shapes does not hold 1 shapes"),
                std::string::npos)
          << e.what();
    }
  }
  // A chunk of the wrong size for its shape names the shape.
  try {
    gather(world, {2, 2, 4}, chunks, 1);
    ADD_FAILURE() << "accepted a chunk of another size";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("chunk 0 is fp32 [6] but a chunk of "
                                         "fp32 [2,4] over 1 ranks is fp32 [8]"),
              std::string::npos)
        << e.what();
  }
}
