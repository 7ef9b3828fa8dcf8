// mpc-onnx-node: runs ONNX's backend node tests on the CPU backend (or CUDA).
//
// Every case directory under the data dir (Debian's libonnx-testdata:
// /usr/share/libonnx-testdata/data/node/<case>/) holds model.onnx and
// test_data_set_N/{input,output}_K.pb. Each case goes through the same path
// as `mpc-run --infer` (runtime/inference.h: verify, infer-shapes,
// fold-constants, then the Executor on the main graph), and its outputs are
// compared with ONNX's own tolerances (onnx/backend/test/runner: rtol 1e-3,
// atol 1e-7, NaN equals NaN; exact for integer and bool outputs; dtype and
// shape must match).
//
// What counts is an explicit allow-list, claimed.txt (see that file for its
// format): every claimed case must exist and pass; a case of a supported op
// that is not claimed carries a one-line reason there; a case that uses only
// supported ops but is neither claimed nor given a reason is reported as
// "unaccounted", with a claimed.txt snippet for it (a warning: no unlisted
// case counts as a failure), so that adding an op shows which cases to
// claim. known-failing.txt lists claimed cases that fail because of a known
// bug; they are reported apart and do not fail the run, but one that passes
// does (remove it from the list).
//
// Every case of the suite, claimed or not, also runs in "no crash" mode:
// loading and running it must succeed or throw mpc::Error. Each case runs in
// a child process (with a time and memory limit), so a crash, a hang or any
// other exception is caught and reported as a failure.
//
// --device=cuda runs the claimed cases on the CUDA backend instead (against
// the same expected data and tolerances): a claimed case with a node the
// CUDA backend has no device code for is counted "not on the device", not
// failed; the unclaimed and no-crash suites are the CPU's business and are
// not run. Each case's child process makes its own CUDA context (a context
// does not survive fork), and the address-space cap is off (the driver maps
// far more than it uses).
//
// Exit status: 0 when nothing failed, 1 otherwise, 77 (ctest SKIP) when the
// data dir is missing or --device=cuda finds no GPU.
#include "ir/tensor_pb.h"
#include "passes/onnx/import_lowering.h"
#include "passes/onnx/onnx_io.h"
#include "passes/shape_inference.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/inference.h"
#include "support/diagnostics.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace mpc;

namespace {

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;
constexpr unsigned kCaseTimeoutSeconds = 30;
constexpr rlim_t kCaseMemoryBytes = rlim_t(8) << 30;
constexpr size_t kMaxMessage = 2000;
constexpr int kSkipExitCode = 77;

// ---- Comparison ------------------------------------------------------------

std::string typeText(const Tensor &t) {
  return std::string(dtypeName(t.dtype)) + "[" + dimsToString(t.dims) + "]";
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// "" when `got` matches `want` as ONNX's runner requires, else what differs.
std::string compareTensors(const Tensor &got, const Tensor &want) {
  if (got.dtype != want.dtype || got.dims != want.dims)
    return "got " + typeText(got) + ", expected " + typeText(want);
  int64_t n = want.numel();
  if (n < 0 || got.bytes.size() != want.bytes.size())
    return "got " + std::to_string(got.bytes.size()) + " bytes, expected " +
           std::to_string(want.bytes.size());
  bool exact = !isFloating(want.dtype);
  int64_t bad = 0, worst = -1;
  double worstExcess = -1;
  for (int64_t i = 0; i < n; ++i) {
    double g = got.getAsDouble(i), w = want.getAsDouble(i);
    bool ok;
    double excess = 0;
    if (exact) {
      ok = g == w;
      excess = std::fabs(g - w);
    } else if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
      excess = INFINITY;
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
      excess = INFINITY;
    } else {
      double tol = kAtol + kRtol * std::fabs(w);
      ok = std::fabs(g - w) <= tol;
      excess = std::fabs(g - w) - tol;
    }
    if (!ok) {
      ++bad;
      if (excess > worstExcess) {
        worstExcess = excess;
        worst = i;
      }
    }
  }
  if (bad == 0)
    return "";
  double g = got.getAsDouble(worst), w = want.getAsDouble(worst);
  std::string index;
  for (size_t d = want.dims.size(), rest = size_t(worst); d-- > 0;) {
    index = std::to_string(rest % size_t(want.dims[d])) +
            (index.empty() ? "" : "," + index);
    rest /= size_t(want.dims[d]);
  }
  std::string s = std::to_string(bad) + " of " + std::to_string(n) +
                  " elements differ; worst at [" + index + "]: got " +
                  formatDouble(g) + ", expected " + formatDouble(w);
  if (!exact && std::isfinite(g) && std::isfinite(w))
    s += " (|diff| " + formatDouble(std::fabs(g - w)) + " > tolerance " +
         formatDouble(kAtol + kRtol * std::fabs(w)) + ")";
  return s;
}

/// The comparator decides every verdict; check it on known answers first.
bool comparatorSelfTest(std::string &why) {
  Tensor a = Tensor::fromFloats({2, 2}, {1.0f, -2.0f, NAN, INFINITY});
  Tensor close = Tensor::fromFloats({2, 2}, {1.0005f, -2.001f, NAN, INFINITY});
  Tensor far = Tensor::fromFloats({2, 2}, {1.0f, -2.01f, NAN, INFINITY});
  Tensor nanVsNumber =
      Tensor::fromFloats({2, 2}, {1.0f, -2.0f, 0.0f, INFINITY});
  Tensor shape = Tensor::fromFloats({4}, {1.0f, -2.0f, NAN, INFINITY});
  Tensor i1 = Tensor::fromInt64s({2}, {3, 4}),
         i2 = Tensor::fromInt64s({2}, {3, 5});
  struct Check {
    const Tensor &got, &want;
    bool equal;
    const char *what;
  } checks[] = {{a, a, true, "identical"},
                {close, a, true, "within rtol"},
                {far, a, false, "beyond rtol"},
                {nanVsNumber, a, false, "number vs NaN"},
                {shape, a, false, "shape"},
                {i1, i1, true, "ints equal"},
                {i2, i1, false, "ints differ"},
                {a.castTo(DType::F64), a, false, "dtype"}};
  for (const Check &c : checks)
    if (compareTensors(c.got, c.want).empty() != c.equal) {
      why = std::string("comparator self-test failed: ") + c.what;
      return false;
    }
  return true;
}

// ---- claimed.txt and known-failing.txt -------------------------------------

struct Lists {
  /// Claimed case -> its op (the [Op] section it is listed under).
  std::map<std::string, std::string> claimed;
  /// Unclaimed case -> (op section, reason).
  std::map<std::string, std::pair<std::string, std::string>> reasons;
  /// Sections in file order.
  std::vector<std::string> ops;
  /// Known-failing claimed case -> note.
  std::map<std::string, std::string> knownFailing;
  std::vector<std::string> errors;
};

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool isCaseName(const std::string &s) {
  if (s.rfind("test_", 0) != 0)
    return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

void readClaimed(const std::string &path, Lists &lists) {
  std::ifstream in(path);
  if (!in) {
    lists.errors.push_back(path + ": cannot open");
    return;
  }
  std::string line, op;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    std::string where = path + ":" + std::to_string(lineNo) + ": ";
    line = trim(line);
    if (line.empty())
      continue;
    if (line[0] == '[') {
      if (line.back() != ']' || line.size() < 3)
        lists.errors.push_back(where + "bad section header '" + line + "'");
      op = trim(line.substr(1, line.size() - 2));
      if (std::find(lists.ops.begin(), lists.ops.end(), op) != lists.ops.end())
        lists.errors.push_back(where + "section [" + op + "] appears twice");
      lists.ops.push_back(op);
      continue;
    }
    if (line[0] == '#') {
      // "# test_case: reason" records an unclaimed case; other # lines are
      // comments.
      std::string body = trim(line.substr(1));
      size_t colon = body.find(':');
      if (colon == std::string::npos || !isCaseName(body.substr(0, colon)))
        continue;
      std::string name = body.substr(0, colon);
      std::string reason = trim(body.substr(colon + 1));
      if (reason.empty())
        lists.errors.push_back(where + name +
                               ": an unclaimed case needs a reason");
      if (lists.reasons.count(name) || lists.claimed.count(name))
        lists.errors.push_back(where + name + " is listed twice");
      lists.reasons[name] = {op, reason};
      continue;
    }
    std::string name = trim(line.substr(0, line.find('#')));
    if (!isCaseName(name)) {
      lists.errors.push_back(where + "expected a case name (test_...), got '" +
                             line + "'");
      continue;
    }
    if (op.empty())
      lists.errors.push_back(where + name +
                             " is listed before any [Op] section");
    if (lists.claimed.count(name) || lists.reasons.count(name))
      lists.errors.push_back(where + name + " is listed twice");
    lists.claimed[name] = op;
  }
}

void readKnownFailing(const std::string &path, Lists &lists) {
  if (path.empty())
    return;
  std::ifstream in(path);
  if (!in) {
    lists.errors.push_back(path + ": cannot open");
    return;
  }
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    std::string where = path + ":" + std::to_string(lineNo) + ": ";
    size_t hash = line.find('#');
    std::string name = trim(line.substr(0, hash));
    if (name.empty())
      continue;
    if (!lists.claimed.count(name))
      lists.errors.push_back(where + name +
                             " is not claimed in claimed.txt (only claimed "
                             "cases can be known to fail)");
    lists.knownFailing[name] =
        hash == std::string::npos ? "" : trim(line.substr(hash + 1));
  }
}

// ---- Running one case
// --------------------------------------------------------

enum class Status { Pass, Mismatch, MpcError, Crash, NotOnDevice };

/// The backend the cases run on (--device).
bool gOnCuda = false;

struct CaseResult {
  Status status = Status::Crash;
  /// Every node of the model is a supported op (false if it does not parse).
  bool supportedOps = false;
  /// The model's op types other than Constant, sorted, '+'-joined
  /// ("Add", "Exp+ReduceSum+Sub"): the section an unaccounted case goes to.
  std::string ops;
  std::string message;
};

std::vector<fs::path> numberedFiles(const fs::path &dir,
                                    const std::string &prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p))
      break;
    files.push_back(p);
  }
  return files;
}

/// What the runner reads from the model proto itself (before mpc imports
/// it, so it is known even for models mpc rejects).
struct ModelFacts {
  bool parsed = false;
  /// Every node of the main graph is an op mpc supports.
  bool supportedOps = false;
  /// ONNX element types of the data inputs and of the outputs, in order.
  std::vector<int> inputTypes, outputTypes;
  std::string ops; ///< as CaseResult::ops
};

ModelFacts readModelFacts(const fs::path &modelPath) {
  ModelFacts facts;
  std::string bytes;
  try {
    bytes = readFile(modelPath.string());
  } catch (const Error &) {
    return facts;
  }
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes))
    return facts;
  facts.parsed = true;
  facts.supportedOps = true;
  std::set<std::string> ops;
  for (const auto &n : proto.graph().node()) {
    std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    if (!isSupportedOp(domain, n.op_type()) &&
        !isLoweredAtImport(domain, n.op_type()))
      facts.supportedOps = false;
    if (n.op_type() != "Constant" || proto.graph().node_size() == 1)
      ops.insert(domain.empty() ? n.op_type() : domain + "." + n.op_type());
  }
  for (const std::string &op : ops)
    facts.ops += (facts.ops.empty() ? "" : "+") + op;
  std::set<std::string> initializers;
  for (const auto &t : proto.graph().initializer())
    initializers.insert(t.name());
  for (const auto &in : proto.graph().input())
    if (!initializers.count(in.name()))
      facts.inputTypes.push_back(in.type().tensor_type().elem_type());
  for (const auto &out : proto.graph().output())
    facts.outputTypes.push_back(out.type().tensor_type().elem_type());
  return facts;
}

/// Reads a test data tensor. ONNX 1.12's generator stores bfloat16 data as
/// UINT16 tensors holding the bit patterns (numpy has no bfloat16); where the
/// model declares that value bfloat16, the bits are read as bfloat16.
Tensor readTestTensor(const fs::path &path, int declaredType) {
  std::string bytes = readFile(path.string());
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes))
    throw Error(path.string() + ": not a serialized TensorProto");
  if (proto.data_type() == onnx::TensorProto::UINT16 &&
      declaredType == onnx::TensorProto::BFLOAT16)
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  Tensor t;
  std::string err;
  if (!tensorFromProto(proto, t, err))
    throw Error(path.string() + ": " + err);
  return t;
}

/// Loads and runs every data set of the case; compares when asked.
CaseResult runCase(const fs::path &caseDir) {
  CaseResult r;
  ModelFacts facts = readModelFacts(caseDir / "model.onnx");
  r.supportedOps = facts.supportedOps;
  r.ops = facts.ops.empty() ? "?" : facts.ops;
  auto declared = [](const std::vector<int> &types, size_t i) {
    return i < types.size() ? types[i] : 0;
  };
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(caseDir))
    if (e.is_directory() &&
        e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  std::unique_ptr<Backend> backend;
  try {
    if (gOnCuda) {
      // Nodes without device code: the case is not the device's to pass.
      std::unique_ptr<Model> model =
          loadModel((caseDir / "model.onnx").string());
      // The element types of values between nodes decide too (an int64 Sub
      // in an expanded function body has no device kernel); an inference
      // error is left for the run to report.
      try {
        inferGraph(*model->graph, model->opsetVersion(""));
      } catch (const Error &) {
      }
      for (const Node *n : model->graph->nodeList()) {
        std::string why;
        if (!cudaBackendSupports(*n, why)) {
          r.status = Status::NotOnDevice;
          r.message = "node '" + n->name() + "' (" + n->opType() + "): " + why;
          return r;
        }
      }
      std::string whyNot;
      // Staged: a node test is one op on given data, and many take shapes
      // as data inputs, which a device-resident step refuses.
      CudaBackendOptions staged;
      staged.resident = false;
      backend = createCudaBackend(whyNot, staged);
      if (!backend)
        throw Error("--device=cuda: " + whyNot);
    } else {
      backend = createCpuBackend();
    }
    if (sets.empty())
      throw Error("no test_data_set_* directory");
    for (const fs::path &set : sets) {
      std::string setName = set.filename().string();
      std::unique_ptr<Model> model =
          loadModel((caseDir / "model.onnx").string());
      std::vector<InferenceInput> inputs;
      for (const fs::path &p : numberedFiles(set, "input_"))
        inputs.push_back(
            {"", readTestTensor(p, declared(facts.inputTypes, inputs.size())),
             p.filename().string()});
      std::vector<fs::path> expected = numberedFiles(set, "output_");
      std::vector<InferenceOutput> outputs =
          runInference(*model, std::move(inputs), *backend);
      if (outputs.size() != expected.size()) {
        r.status = Status::Mismatch;
        r.message = setName + ": the model has " +
                    std::to_string(outputs.size()) + " outputs, the data " +
                    std::to_string(expected.size());
        return r;
      }
      for (size_t i = 0; i < outputs.size(); ++i) {
        std::string diff = compareTensors(
            outputs[i].value,
            readTestTensor(expected[i], declared(facts.outputTypes, i)));
        if (!diff.empty()) {
          r.status = Status::Mismatch;
          r.message = setName + ": output " + std::to_string(i) + " '" +
                      outputs[i].name + "': " + diff;
          return r;
        }
      }
    }
    r.status = Status::Pass;
  } catch (const Error &e) {
    r.status = Status::MpcError;
    r.message = e.what();
  } catch (const std::exception &e) {
    r.status = Status::Crash;
    r.message = std::string("exception other than mpc::Error: ") + e.what();
  }
  return r;
}

// ---- Child processes
// -----------------------------------------------------------

std::string serialize(const CaseResult &r) {
  std::string msg = r.message.substr(0, kMaxMessage);
  for (char &c : msg)
    if (c == '\n')
      c = ' ';
  std::string ops = r.ops.empty() ? "?" : r.ops;
  for (char &c : ops)
    if (c == ' ' || c == '\n')
      c = '_';
  return std::to_string(int(r.status)) + " " + (r.supportedOps ? "1" : "0") +
         " " + ops + " " + msg;
}

CaseResult deserialize(const std::string &s) {
  CaseResult r;
  if (s.size() < 4 || s[1] != ' ' || s[3] != ' ') {
    r.status = Status::Crash;
    r.message = "the case process exited without a result";
    return r;
  }
  r.status = Status(s[0] - '0');
  r.supportedOps = s[2] == '1';
  size_t space = s.find(' ', 4);
  r.ops =
      s.substr(4, space == std::string::npos ? std::string::npos : space - 4);
  r.message = space == std::string::npos ? "" : s.substr(space + 1);
  return r;
}

struct Running {
  std::string name;
  int fd;
};

/// Runs `names` in child processes, `jobs` at a time.
std::map<std::string, CaseResult> runAll(const fs::path &dataDir,
                                         const std::vector<std::string> &names,
                                         int jobs) {
  std::map<std::string, CaseResult> results;
  std::map<pid_t, Running> running;
  size_t next = 0;
  auto finish = [&](pid_t pid, int status) {
    Running run = running.at(pid);
    running.erase(pid);
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(run.fd, buf, sizeof buf)) > 0)
      text.append(buf, size_t(n));
    close(run.fd);
    CaseResult r = deserialize(text);
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      r.status = Status::Crash;
      r.message =
          sig == SIGALRM
              ? "timed out after " + std::to_string(kCaseTimeoutSeconds) + " s"
              : std::string("killed by signal ") + std::to_string(sig) + " (" +
                    strsignal(sig) + ")";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      r.status = Status::Crash;
      r.message = "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    results[run.name] = r;
  };
  while (next < names.size() || !running.empty()) {
    while (next < names.size() && int(running.size()) < jobs) {
      const std::string &name = names[next++];
      int fds[2];
      if (pipe(fds) != 0) {
        std::perror("pipe");
        std::exit(1);
      }
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid < 0) {
        std::perror("fork");
        std::exit(1);
      }
      if (pid == 0) {
        close(fds[0]);
        alarm(kCaseTimeoutSeconds);
#ifndef __SANITIZE_ADDRESS__
        // (AddressSanitizer reserves terabytes of shadow address space, so
        // an address-space cap would kill every case under make test-asan;
        // so does the CUDA driver.)
        if (!gOnCuda) {
          struct rlimit lim = {kCaseMemoryBytes, kCaseMemoryBytes};
          setrlimit(RLIMIT_AS, &lim);
        }
#endif
        std::string out = serialize(runCase(dataDir / name));
        size_t off = 0;
        while (off < out.size()) {
          ssize_t w = write(fds[1], out.data() + off, out.size() - off);
          if (w <= 0)
            break;
          off += size_t(w);
        }
        close(fds[1]);
        _exit(0);
      }
      close(fds[1]);
      running[pid] = {name, fds[0]};
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      std::perror("waitpid");
      std::exit(1);
    }
    if (running.count(pid))
      finish(pid, status);
  }
  return results;
}

// ---- Main
// ----------------------------------------------------------------------

struct Options {
  std::string dataDir = "/usr/share/libonnx-testdata/data/node";
  std::string claimed, knownFailing;
  std::vector<std::string> only; ///< --case: run these in-process, verbose
  /// --no-crash-dir: more suites (same layout) whose cases need only not
  /// crash (ONNX's simple/ and pytorch-*/ model tests).
  std::vector<std::string> noCrashDirs;
  int jobs = 2;
  bool verbose = false;
  std::string device = "cpu"; ///< --device=cpu|cuda
};

const char *kUsage =
    R"(usage: mpc-onnx-node --claimed=claimed.txt [--known-failing=FILE]
                     [--data-dir=DIR] [--no-crash-dir=DIR...] [--jobs=N]
                     [--verbose] [--case=NAME...] [--device=cpu|cuda]

Runs ONNX's backend node tests (DIR/<case>/model.onnx and test_data_set_*)
on mpc's CPU backend and checks the claimed cases pass. --no-crash-dir adds
suites of the same layout whose cases must only not crash. --case runs only
the named cases of DIR, in this process, and prints each verdict.
--device=cuda runs the claimed cases on the CUDA backend (skipped, exit 77,
without a GPU); cases with ops it has no device code for are counted apart.
)";

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> std::string {
      std::string prefix = std::string(flag) + "=";
      return a.rfind(prefix, 0) == 0 ? a.substr(prefix.size()) : "";
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a.rfind("--data-dir=", 0) == 0) {
      o.dataDir = value("--data-dir");
    } else if (a.rfind("--claimed=", 0) == 0) {
      o.claimed = value("--claimed");
    } else if (a.rfind("--known-failing=", 0) == 0) {
      o.knownFailing = value("--known-failing");
    } else if (a.rfind("--no-crash-dir=", 0) == 0) {
      o.noCrashDirs.push_back(value("--no-crash-dir"));
    } else if (a.rfind("--case=", 0) == 0) {
      o.only.push_back(value("--case"));
    } else if (a.rfind("--jobs=", 0) == 0) {
      o.jobs = std::max(1, std::atoi(value("--jobs").c_str()));
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a.rfind("--device=", 0) == 0) {
      o.device = value("--device");
      if (o.device != "cpu" && o.device != "cuda") {
        std::cerr << "mpc-onnx-node: --device: expected cpu or cuda, got '"
                  << o.device << "'\n";
        std::exit(2);
      }
    } else {
      std::cerr << "mpc-onnx-node: unknown argument '" << a << "'\n" << kUsage;
      std::exit(2);
    }
  }
  if (o.claimed.empty() && o.only.empty()) {
    std::cerr << "mpc-onnx-node: --claimed=FILE is required\n" << kUsage;
    std::exit(2);
  }
  return o;
}

const char *statusName(Status s) {
  switch (s) {
  case Status::Pass:
    return "pass";
  case Status::Mismatch:
    return "mismatch";
  case Status::MpcError:
    return "mpc::Error";
  case Status::Crash:
    return "crash";
  case Status::NotOnDevice:
    return "not on the device";
  }
  return "?";
}

/// The case directories (those holding a model.onnx) of a suite, sorted.
std::vector<std::string> caseNames(const fs::path &dir) {
  std::vector<std::string> cases;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx"))
      cases.push_back(e.path().filename().string());
  std::sort(cases.begin(), cases.end());
  return cases;
}

/// --case mode: in-process, for debugging one case.
int runOnly(const Options &o) {
  int bad = 0;
  for (const std::string &name : o.only) {
    CaseResult r = runCase(fs::path(o.dataDir) / name);
    std::cout << name << ": " << statusName(r.status)
              << (r.message.empty() ? "" : ": " + r.message) << "\n";
    bad += r.status != Status::Pass;
  }
  return bad ? 1 : 0;
}

/// Whether a CUDA backend can be made, asked in a child process so this
/// process never holds a CUDA context across the forks that follow.
bool cudaAvailable(std::string &whyNot) {
  int fds[2];
  if (pipe(fds) != 0) {
    whyNot = "pipe failed";
    return false;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string why;
    bool ok = createCudaBackend(why) != nullptr;
    if (!ok && write(fds[1], why.data(), why.size()) < 0)
      _exit(2);
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  char buf[1024];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0)
    whyNot.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) {
    whyNot = "fork failed";
    return false;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return true;
  if (whyNot.empty())
    whyNot = "the CUDA probe process failed";
  return false;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  if (!fs::is_directory(o.dataDir)) {
    std::cout << "mpc-onnx-node: SKIPPED: no ONNX node test data at "
              << o.dataDir << " (install Debian's libonnx-testdata)\n";
    return kSkipExitCode;
  }
  std::string why;
  if (!comparatorSelfTest(why)) {
    std::cout << "mpc-onnx-node: " << why << "\n";
    return 1;
  }
  if (o.device == "cuda") {
    std::string whyNot;
    if (!cudaAvailable(whyNot)) {
      std::cout << "mpc-onnx-node: SKIPPED: --device=cuda: " << whyNot << "\n";
      return kSkipExitCode;
    }
    gOnCuda = true;
  }
  if (!o.only.empty())
    return runOnly(o);

  auto start = std::chrono::steady_clock::now();
  Lists lists;
  readClaimed(o.claimed, lists);
  readKnownFailing(o.knownFailing, lists);

  std::vector<std::string> cases = caseNames(o.dataDir);
  std::set<std::string> present(cases.begin(), cases.end());
  for (const auto &kv : lists.claimed)
    if (!present.count(kv.first))
      lists.errors.push_back("claimed case " + kv.first +
                             " does not exist in " + o.dataDir);
  for (const auto &kv : lists.reasons)
    if (!present.count(kv.first))
      lists.errors.push_back("unclaimed case " + kv.first +
                             " (given a reason) does not exist in " +
                             o.dataDir);

  if (gOnCuda) {
    // On the device only the claims are checked.
    std::vector<std::string> claimedCases;
    for (const std::string &name : cases)
      if (lists.claimed.count(name))
        claimedCases.push_back(name);
    cases = std::move(claimedCases);
  }
  std::map<std::string, CaseResult> results = runAll(o.dataDir, cases, o.jobs);

  struct OpRow {
    int claimed = 0, passed = 0, knownFailing = 0, unclaimed = 0;
  };
  std::map<std::string, OpRow> rows;
  int passed = 0, failed = 0, known = 0, xpass = 0, notClaimed = 0, crashes = 0,
      unaccounted = 0, wouldPass = 0, notOnDevice = 0;
  std::vector<std::string> lines;
  /// Unaccounted cases by op: a claimed.txt snippet for whoever added the op.
  std::map<std::string, std::vector<std::string>> suggestions;
  for (const std::string &name : cases) {
    const CaseResult &r = results.at(name);
    auto claim = lists.claimed.find(name);
    bool isClaimed = claim != lists.claimed.end();
    bool isKnown = lists.knownFailing.count(name) > 0;
    std::string tag = isClaimed ? "" : " [not claimed]";
    if (r.status == Status::Crash) {
      ++crashes;
      lines.push_back("CRASH " + name + tag + ": " + r.message);
    }
    if (!isClaimed) {
      ++notClaimed;
      auto reason = lists.reasons.find(name);
      if (reason != lists.reasons.end())
        ++rows[reason->second.first].unclaimed;
      if (r.status == Status::Pass)
        ++wouldPass;
      if (o.verbose && r.status != Status::Crash)
        lines.push_back(std::string("not claimed ") + name + ": " +
                        statusName(r.status) +
                        (r.message.empty() ? "" : ": " + r.message));
      if (reason == lists.reasons.end() && r.supportedOps) {
        ++unaccounted;
        suggestions[r.ops].push_back(r.status == Status::Pass
                                         ? name
                                         : "# " + name + ": FIXME " +
                                               statusName(r.status) + ": " +
                                               r.message.substr(0, 160));
        lines.push_back("UNACCOUNTED (warning) " + name +
                        ": uses only supported ops (" + statusName(r.status) +
                        ") but is neither claimed nor given a reason in "
                        "claimed.txt");
      }
      continue;
    }
    OpRow &row = rows[claim->second];
    if (r.status == Status::NotOnDevice) {
      ++notOnDevice;
      if (o.verbose)
        lines.push_back("not on the device " + name + ": " + r.message);
      continue;
    }
    ++row.claimed;
    if (r.status == Status::Pass) {
      ++passed;
      ++row.passed;
      if (isKnown) {
        ++xpass;
        lines.push_back("XPASS " + name +
                        ": listed in known-failing.txt but passes; remove it "
                        "from the list");
      }
    } else if (isKnown) {
      ++known;
      ++row.knownFailing;
      lines.push_back("KNOWN-FAILING " + name + ": " + statusName(r.status) +
                      ": " + r.message);
    } else {
      ++failed; // a crash is reported above
      if (r.status != Status::Crash)
        lines.push_back("FAIL " + name + ": " + statusName(r.status) + ": " +
                        r.message);
    }
  }
  // The extra suites: any crash fails the run; the rest is information.
  std::vector<std::string> noCrashSummaries;
  for (const std::string &dir : o.noCrashDirs) {
    if (gOnCuda) {
      noCrashSummaries.push_back(dir + ": not run on the device");
      continue;
    }
    if (!fs::is_directory(dir)) {
      noCrashSummaries.push_back(dir + ": absent, skipped");
      continue;
    }
    std::vector<std::string> extra = caseNames(dir);
    std::map<std::string, CaseResult> extraResults = runAll(dir, extra, o.jobs);
    int extraCrashes = 0, extraPassed = 0;
    for (const std::string &name : extra) {
      const CaseResult &r = extraResults.at(name);
      if (r.status == Status::Crash) {
        ++extraCrashes;
        lines.push_back("CRASH " + (fs::path(dir) / name).string() + ": " +
                        r.message);
      } else if (o.verbose) {
        lines.push_back("no-crash " + (fs::path(dir) / name).string() + ": " +
                        statusName(r.status) +
                        (r.message.empty() ? "" : ": " + r.message));
      }
      extraPassed += r.status == Status::Pass;
    }
    crashes += extraCrashes;
    noCrashSummaries.push_back(
        dir + ": " + std::to_string(extra.size()) + " cases, crashes " +
        std::to_string(extraCrashes) + ", " + std::to_string(extraPassed) +
        " would pass (not claimed)");
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  for (const std::string &e : lists.errors)
    std::cout << "LIST-ERROR " << e << "\n";
  for (const std::string &l : lines)
    std::cout << l << "\n";
  std::cout << "\n| op | cases claimed | passed | known failing | not claimed "
               "(reason in claimed.txt) |\n|---|---|---|---|---|\n";
  OpRow total;
  for (const std::string &op : lists.ops) {
    const OpRow &row = rows[op];
    std::cout << "| " << op << " | " << row.claimed << " | " << row.passed
              << " | " << row.knownFailing << " | " << row.unclaimed << " |\n";
    total.claimed += row.claimed;
    total.passed += row.passed;
    total.knownFailing += row.knownFailing;
    total.unclaimed += row.unclaimed;
  }
  std::cout << "| **total** | " << total.claimed << " | " << total.passed
            << " | " << total.knownFailing << " | " << total.unclaimed
            << " |\n\n";
  if (!suggestions.empty()) {
    std::cout << "Unaccounted cases by op, for claimed.txt (claim the passing "
                 "ones; the others need a reason or a fix):\n";
    for (const auto &[op, entries] : suggestions) {
      std::cout << "[" << op << "]\n";
      for (const std::string &e : entries)
        std::cout << e << "\n";
    }
    std::cout << "\n";
  }
  for (const std::string &line : noCrashSummaries)
    std::cout << "no-crash: " << line << "\n";
  if (gOnCuda)
    std::printf("onnx-node: on cuda: %d claimed cases have a node without "
                "device code (--verbose lists them); the table counts the "
                "rest\n",
                notOnDevice);
  std::printf("onnx-node: %zu cases: passed %d / failed %d / not claimed %d "
              "(known failing %d, unexpectedly passing %d, crashes %d, "
              "unaccounted %d, list errors %zu; %d unclaimed cases would "
              "pass) in %.1f s\n",
              cases.size(), passed, failed, notClaimed, known, xpass, crashes,
              unaccounted, lists.errors.size(), wouldPass, seconds);
  // Unaccounted cases are a warning: nothing unlisted fails the run (but a
  // crash does, listed or not).
  bool ok = failed == 0 && xpass == 0 && crashes == 0 && lists.errors.empty();
  std::printf("onnx-node: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
