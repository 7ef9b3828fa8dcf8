// mpc-opt's compile of one model: the pipeline the flags ask for, the
// reports (--explain, --dot, --report=memory, --stats) and the output bytes
// or file. tools/mpc-opt/main.cpp reads the input and calls it per model
// (per chunk with --split-input-file).
#pragma once

#include "passes/pipeline.h"
#include "support/file_io.h"
#include "tools/mpc-opt/opt_flags.h"

#include <memory>
#include <string>

namespace mpc {

// mpc-opt's outputs are renamed into place but not fsynced: like a compiler's
// object files they are made again from the input (support/file_io.h).
constexpr Fsync kOutputSync = Fsync::No;

/// Runs fn and adds its wall time to `timings` under name (when timing).
template <typename Fn>
auto timed(PassTimings *timings, const std::string &name, Fn &&fn) {
  struct Add {
    PassTimings *timings;
    const std::string &name;
    TimePoint start;
    ~Add() {
      if (timings)
        timings->add(name, start);
    }
  } add{timings, name, TimePoint::now()};
  return fn();
}

/// Compiles one model; returns the bytes to write, or, with `writeTo` and a
/// binary output, serializes the model straight into that file (atomically)
/// and returns "".
std::string compileModel(std::unique_ptr<Model> model, const OptFlags &f,
                         PassTimings *timings,
                         const std::string *writeTo = nullptr);

} // namespace mpc
