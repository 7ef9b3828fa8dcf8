// MPC_CUDA_PROFILE's report (runtime/cuda/op_times.h) on made-up times: the
// per-step arithmetic, the ops most time first, the slowest nodes, and the
// "cuda profile: " prefix tools/gpu-check.sh's step-profile stage reads.
#include "runtime/cuda/op_times.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace mpc {
namespace cuda {
namespace {

std::vector<std::string> report(const OpTimes &t) {
  char *buffer = nullptr;
  size_t size = 0;
  std::FILE *f = open_memstream(&buffer, &size);
  t.print(f);
  std::fclose(f);
  std::vector<std::string> lines;
  std::istringstream in(std::string(buffer, size));
  std::free(buffer);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

TEST(OpTimes, ReportsPerStepOpsThenTheSlowestNodes) {
  OpTimes t;
  EXPECT_TRUE(report(t).empty()) << "no timed step, no report";
  for (int step = 0; step < 2; ++step) {
    t.addStep(12.0);
    t.add("/blocks.0/MatMul_1", "MatMul", 3.0);
    t.add("/blocks.1/MatMul_2", "MatMul", 1.0);
    t.add("/blocks.0/Add_3", "Add", 5.0);
  }
  std::vector<std::string> lines = report(t);
  ASSERT_EQ(lines.size(), 8u);
  for (const std::string &line : lines)
    EXPECT_EQ(line.rfind("cuda profile: ", 0), 0u) << line;
  EXPECT_EQ(lines[0], "cuda profile: 2 steps after the first; per step 12.000 "
                      "ms wall, 9.000 ms of device time inside 3 nodes");
  // Add (5 ms, one node) before MatMul (4 ms, two nodes); shares of 9 ms.
  EXPECT_NE(lines[2].find("Add"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(" 1 "), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("5.000"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("55.6%"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("MatMul"), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find(" 2 "), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find("4.000"), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find("44.4%"), std::string::npos) << lines[3];
  EXPECT_EQ(lines[4], "cuda profile: the 3 slowest nodes");
  EXPECT_NE(lines[5].find("/blocks.0/Add_3"), std::string::npos) << lines[5];
  EXPECT_NE(lines[6].find("/blocks.0/MatMul_1"), std::string::npos);
  EXPECT_NE(lines[7].find("/blocks.1/MatMul_2"), std::string::npos);
  EXPECT_NE(lines[7].find("1.000 ms/step"), std::string::npos) << lines[7];
}

} // namespace
} // namespace cuda
} // namespace mpc
