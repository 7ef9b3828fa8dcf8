// ReluChain: the smallest model the pipeline tests need, x[4] -> Relu -> a ->
// Relu -> y, with every value declared as inference gives it (as infer-shapes
// leaves a model). Shared by the tests of verify-each's skipping and of
// plan-memory's inference skip, which break or keep exactly this chain.
#pragma once

#include "ir/graph.h"

namespace mpc {

struct ReluChain {
  Model m;
  Value *x, *a, *y;
  ReluChain() {
    Graph &g = *m.graph;
    x = g.addInput("x", DType::F32, {Dim(4)});
    a = g.createNode("Relu", {x}, 1, "first")->output(0);
    a->setType(DType::F32, {Dim(4)});
    y = g.createNode("Relu", {a}, 1, "second")->output(0);
    y->setType(DType::F32, {Dim(4)});
    g.addOutput(y);
  }
};

} // namespace mpc
