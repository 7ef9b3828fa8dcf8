// The `mpc` Python module: compile a model into a training step and train
// it from Python batches, binding the libraries the CLIs run (mpc-opt's
// compile flags and pipeline, mpc-run's TrainingSession), not a second
// training loop.
//
//   step = mpc.compile("model.onnx", optimizer="adamw", lr=3e-4,
//                      precision="fp16")   # keyword = mpc-opt flag
//   tr = mpc.Trainer(step)                  # or mpc.Trainer("step.onnx")
//   loss = tr.step({"x": x, "y": y})        # one optimizer step
//
// Errors are mpc.Error (a RuntimeError) with the tools' one-line message.
#include "passes/memory_baseline.h"
#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "passes/precision_map.h"
#include "python/batch_check.h"
#include "python/compile_step.h"
#include "python/numpy_tensor.h"
#include "python/py_trainer.h"
#include "support/diagnostics.h"
#include "support/out_of_memory.h"

#include <pybind11/stl.h>

#include <cstring>
#include <iostream>
#include <memory>

namespace py = pybind11;
using namespace mpc;

namespace {

/// A compiled training step held in memory (mpc.compile's result).
struct Step {
  std::shared_ptr<Model> model;
  std::string source;     ///< the model it was compiled from
  CompileOptions options; ///< what it was compiled with (memory_report)
};

/// The path of a str or os.PathLike argument.
std::string pathOf(const py::handle &path, const char *what) {
  auto nonEmpty = [&](std::string p) {
    // An empty path names no file: refused here, not read as "no file"
    // further down (a checkpoint to "" would write nothing and say so
    // nowhere).
    if (p.empty())
      throw Error(std::string(what) + ": the path is empty");
    return p;
  };
  if (py::isinstance<py::str>(path))
    return nonEmpty(path.cast<std::string>());
  if (py::hasattr(path, "__fspath__")) {
    py::object p = path.attr("__fspath__")();
    if (py::isinstance<py::str>(p))
      return nonEmpty(p.cast<std::string>());
  }
  std::string line = std::string(what) +
                     ": expected a path (str or os.PathLike), got " +
                     std::string(py::str(py::type::of(path).attr("__name__")));
  // A torch module handed over as it is: mpc reads its ONNX export.
  if (py::hasattr(path, "forward") && py::hasattr(path, "parameters"))
    line += "; export the module with its loss first: "
            "torch.onnx.export(module, args, \"model.onnx\", dynamo=True, "
            "optimize=False)";
  throw Error(line);
}

/// A keyword argument as a compile flag: lr=0.01 -> ("--lr", "0.01"),
/// nesterov=True -> ("--nesterov", bare), a list -> the flag once per item.
void addFlag(std::vector<CompileFlagArg> &flags, const std::string &keyword,
             const py::handle &value) {
  std::string key = "--" + keyword;
  for (char &c : key)
    if (c == '_')
      c = '-';
  if (value.is_none())
    return; // as if not given (loss=None)
  if (py::isinstance<py::bool_>(value)) {
    if (value.cast<bool>())
      flags.emplace_back(key, std::nullopt);
    else
      flags.emplace_back(key, std::string("false"));
    return;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (const py::handle &item : value)
      addFlag(flags, keyword, item);
    return;
  }
  flags.emplace_back(key, std::string(py::str(value)));
}

/// A batch argument: a dict of name -> array.
std::vector<std::pair<std::string, Tensor>> arraysOf(const py::handle &batch,
                                                     const std::string &what) {
  if (!py::isinstance<py::dict>(batch))
    throw Error(what + ": expected a dict of input name -> array, got " +
                std::string(py::str(py::type::of(batch).attr("__name__"))));
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const auto &[key, value] : py::reinterpret_borrow<py::dict>(batch)) {
    if (!py::isinstance<py::str>(key))
      throw Error(what + ": keys are input names (str), got " +
                  std::string(py::repr(key)));
    std::string name = key.cast<std::string>();
    arrays.emplace_back(
        name, tensorFromArray(value, what + ": input '" + name + "'"));
  }
  return arrays;
}

/// The data inputs' names, for an error: "x, y".
std::string inputNames(const std::vector<DataInputSpec> &specs) {
  std::string list;
  for (const DataInputSpec &s : specs)
    list += (list.empty() ? "" : ", ") + s.name;
  return list;
}

/// Splits a batch of K x B samples into K micro-batches of B.
std::vector<std::vector<std::pair<std::string, Tensor>>>
splitSamples(std::vector<std::pair<std::string, Tensor>> arrays, int64_t k,
             int64_t b) {
  std::vector<std::vector<std::pair<std::string, Tensor>>> parts(
      static_cast<size_t>(k));
  for (auto &[name, t] : arrays) {
    if (t.dims.empty()) {
      for (auto &part : parts) // checkBatch says what is wrong
        part.emplace_back(name, t);
      continue;
    }
    if (t.dims[0] != k * b)
      throw Error("batch: input '" + name + "': holds " +
                  std::to_string(t.dims[0]) + " samples; a step of " +
                  std::to_string(k) + " micro-batches (--grad-accum) of " +
                  std::to_string(b) + " takes " + std::to_string(k * b) +
                  " (or a list of " + std::to_string(k) + " dicts)");
    size_t bytes = t.byteSize() / size_t(k);
    for (int64_t j = 0; j < k; ++j) {
      std::vector<int64_t> dims = t.dims;
      dims[0] = b;
      Tensor part(t.dtype, dims);
      std::memcpy(part.bytes.data(),
                  t.bytes.unalignedData() + size_t(j) * bytes, bytes);
      parts[size_t(j)].emplace_back(name, std::move(part));
    }
  }
  return parts;
}

PyTrainerOptions trainerOptions(const std::string &device, int64_t batch,
                                const py::object &seed, const py::object &log,
                                bool externalData, bool quiet) {
  PyTrainerOptions o;
  o.device = device;
  if (batch < 0)
    throw Error("batch=" + std::to_string(batch) +
                ": expected a positive "
                "batch size");
  o.batch = batch;
  if (!seed.is_none()) {
    o.seedGiven = true;
    o.seed = seed.cast<uint64_t>();
  }
  if (!log.is_none())
    o.log = pathOf(log, "log");
  o.externalData = externalData;
  o.quiet = quiet;
  return o;
}

std::unique_ptr<PyTrainer> makeTrainer(const py::object &model,
                                       const std::string &resume,
                                       const PyTrainerOptions &o) {
  if (py::isinstance<Step>(model)) {
    const Step &step = model.cast<const Step &>();
    std::unique_ptr<Model> copy;
    {
      py::gil_scoped_release release;
      copy = reloadCompiled(*step.model, step.source);
    }
    return std::make_unique<PyTrainer>(std::move(copy), step.source, resume, o);
  }
  std::string path = pathOf(model, "mpc.Trainer's model");
  py::gil_scoped_release release;
  return std::make_unique<PyTrainer>(nullptr, path, resume, o);
}

/// Runs `f` with the GIL released and the trainer's lock held.
template <typename F> auto locked(PyTrainer &t, F &&f) {
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> guard(t.lock());
  return f();
}

} // namespace

PYBIND11_MODULE(mpc, m) {
  m.doc() = "mpc: mixed-precision training compiler and runtime for ONNX";
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const Error &e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const std::bad_alloc &) {
      PyErr_SetString(PyExc_MemoryError, outOfMemoryMessage("it").c_str());
    }
  });

  py::class_<Step>(m, "Step",
                   "A compiled training step (mpc.compile's result).")
      .def(
          "save",
          [](const Step &s, const py::object &path, bool externalData) {
            std::string p = pathOf(path, "Step.save");
            ModelWriteOptions w;
            w.externalData =
                externalData ? ExternalData::Always : ExternalData::Auto;
            py::gil_scoped_release release;
            writeModelFile(*s.model, p, w);
          },
          py::arg("path"), py::arg("external_data") = false,
          "Writes the compiled model (binary ONNX), as mpc-opt -o PATH.")
      .def(
          "text", [](const Step &s) { return printModelText(*s.model); },
          "The model as ONNX text, every graph (mpc-opt --emit=text).")
      .def(
          "explain", [](const Step &s) { return explainPrecision(*s.model); },
          "Why each node runs in the precision it does: the autocast's "
          "table, as mpc-opt --explain prints it.")
      .def(
          "memory_report",
          [](const Step &s) {
            std::string json;
            {
              py::gil_scoped_release release;
              json = reportStepMemory(*s.model, s.source, s.options).json();
            }
            return py::module_::import("json").attr("loads")(json);
          },
          "The step's memory plan by class next to the same model compiled "
          "in fp32, as a dict: mpc-opt --report-json's document "
          "(planned, fp32_baseline, ratio, flops).")
      .def_property_readonly(
          "source", [](const Step &s) { return s.source; },
          "The model it was compiled from.")
      .def("__repr__", [](const Step &s) {
        return "<mpc.Step compiled from " + s.source + ">";
      });

  m.def(
      "compile",
      [](const py::object &model, const py::kwargs &kwargs) {
        std::string path = pathOf(model, "mpc.compile's model");
        std::vector<CompileFlagArg> flags;
        for (const auto &[key, value] : kwargs)
          addFlag(flags, key.cast<std::string>(), value);
        std::vector<std::string> notes;
        CompiledStep compiled;
        {
          py::gil_scoped_release release;
          compiled = compileStep(path, flags, &notes);
        }
        for (const std::string &note : notes)
          std::cerr << "mpc: note: " << note << "\n";
        return Step{std::shared_ptr<Model>(std::move(compiled.model)), path,
                    std::move(compiled.options)};
      },
      py::arg("model"),
      "Compiles MODEL (ONNX, a forward with a scalar loss) into one "
      "training step. Keyword arguments are mpc-opt's compile flags: "
      "lr=3e-4 is --lr=0.0003, a True switch is given bare, a list gives "
      "the flag once per item.");

  py::class_<PyTrainer>(m, "Trainer",
                        "Trains a compiled step (mpc.Step or a file) on "
                        "batches from Python, as mpc-run trains.")
      .def(py::init([](const py::object &model, const std::string &device,
                       int64_t batch, const py::object &seed,
                       const py::object &log, bool externalData, bool quiet) {
             return makeTrainer(
                 model, "",
                 trainerOptions(device, batch, seed, log, externalData, quiet));
           }),
           py::arg("model"), py::arg("device") = "cpu", py::arg("batch") = 0,
           py::arg("seed") = py::none(), py::arg("log") = py::none(),
           py::arg("external_data") = false, py::arg("quiet") = true)
      .def_static(
          "resume",
          [](const py::object &checkpoint, const std::string &device,
             int64_t batch, const py::object &log, bool externalData,
             bool quiet) {
            std::string path = pathOf(checkpoint, "Trainer.resume");
            return makeTrainer(checkpoint, path,
                               trainerOptions(device, batch, py::none(), log,
                                              externalData, quiet));
          },
          py::arg("checkpoint"), py::arg("device") = "cpu",
          py::arg("batch") = 0, py::arg("log") = py::none(),
          py::arg("external_data") = false, py::arg("quiet") = true,
          "Goes on from a checkpoint (Trainer.save, mpc-run --save): its "
          "state, step count and data order, as mpc-run --resume.")
      .def(
          "step",
          [](PyTrainer &t, const py::object &batch) {
            const int64_t k = t.microBatches();
            std::vector<std::vector<std::pair<std::string, Tensor>>> parts;
            if (py::isinstance<py::list>(batch) ||
                py::isinstance<py::tuple>(batch)) {
              // A DataLoader's (x, y) passed as it comes: say what a batch
              // is, not that micro-batch 0 is not a dict.
              py::sequence items = py::reinterpret_borrow<py::sequence>(batch);
              if (k == 1 &&
                  (items.size() != 1 || !py::isinstance<py::dict>(items[0])))
                throw Error(
                    "batch: expected a dict of input name -> array (the "
                    "step's inputs: " +
                    inputNames(t.inputs()) + "), got a " +
                    std::string(py::str(py::type::of(batch).attr("__name__"))) +
                    (items.size()
                         ? " of " +
                               std::string(py::str(
                                   py::type::of(items[0]).attr("__name__")))
                         : std::string()) +
                    "; a list of dicts is the micro-batches of a step "
                    "compiled with --grad-accum");
              int64_t j = 0;
              for (const py::handle &micro : batch)
                parts.push_back(
                    arraysOf(micro, "micro-batch " + std::to_string(j++)));
            } else if (k > 1) {
              parts = splitSamples(arraysOf(batch, "batch"), k, t.batch());
            } else {
              parts.push_back(arraysOf(batch, "batch"));
            }
            if (int64_t(parts.size()) != k)
              throw Error("a step takes " + std::to_string(k) +
                          " micro-batches (--grad-accum), got " +
                          std::to_string(parts.size()));
            std::vector<Trainer::Batch> micro;
            for (size_t j = 0; j < parts.size(); ++j)
              micro.push_back(checkBatch(
                  std::move(parts[j]), t.inputs(), t.batch(),
                  k > 1 ? "micro-batch " + std::to_string(j) : "batch"));
            return locked(t, [&] { return t.step(std::move(micro)); });
          },
          py::arg("batch"),
          "One optimizer step on a dict of input name -> array (B samples; "
          "K x B, or a list of K dicts, for a step compiled with "
          "--grad-accum=K). Returns the loss (fp32, unscaled).")
      .def(
          "evaluate",
          [](PyTrainer &t, const py::object &batch) {
            auto arrays = arraysOf(batch, "batch");
            std::vector<std::pair<std::string, Tensor>> outputs =
                locked(t, [&] {
                  // Any batch size (0: the first array's).
                  Trainer::Batch checked =
                      checkBatch(std::move(arrays), t.evalInputs(), 0, "batch");
                  int64_t samples = checked.front().second.dims[0];
                  return t.evaluate(checked, samples);
                });
            py::dict result;
            for (const auto &[name, value] : outputs)
              result[py::str(name)] = arrayFromTensor(value);
            return result;
          },
          py::arg("batch"),
          "The forward in inference form on one batch (any size its export "
          "allows) with the current parameters: a dict of its outputs (the "
          "loss, logits, ...), as mpc-run --eval-data evaluates.")
      .def(
          "predict",
          [](PyTrainer &t, const py::object &batch,
             const std::vector<std::string> &outputs) {
            std::vector<InferenceInput> inputs;
            for (auto &[name, value] : arraysOf(batch, "batch"))
              inputs.push_back({name, std::move(value), ""});
            std::vector<InferenceOutput> results = locked(
                t, [&] { return t.predict(outputs, std::move(inputs)); });
            py::dict result;
            for (const InferenceOutput &o : results)
              result[py::str(o.name)] = arrayFromTensor(o.value);
            return result;
          },
          py::arg("batch"), py::arg("outputs") = std::vector<std::string>{},
          "What the deployed model (export_inference) would output now: "
          "OUTPUTS (default every output but the loss, e.g. the logits) on "
          "a dict of the inputs they need (no labels), of any batch size "
          "the export allows, in inference form with the current "
          "parameters. A dict name -> numpy array.")
      .def(
          "save",
          [](PyTrainer &t, const py::object &path) {
            std::string p = pathOf(path, "Trainer.save");
            locked(t, [&] {
              t.session().saveCheckpoint(p);
              return 0;
            });
          },
          py::arg("path"),
          "Writes a checkpoint (mpc-run --save): Trainer.resume goes on "
          "from it bit for bit.")
      .def(
          "state_dict",
          [](PyTrainer &t) {
            std::vector<StateDictEntry> entries =
                locked(t, [&] { return t.trainer().stateDict(); });
            py::dict result;
            for (const StateDictEntry &e : entries)
              result[py::str(e.name)] = arrayFromTensor(e.value);
            return result;
          },
          "The trained parameters and buffers under the model's names "
          "(mpc-run --export-safetensors' tensors), as numpy arrays.")
      .def(
          "export_inference",
          [](PyTrainer &t, const py::object &path,
             const std::vector<std::string> &outputs,
             const std::string &precision) {
            std::string p = pathOf(path, "export_inference");
            InferenceExportOptions options;
            options.outputs = outputs;
            if (precision == "fp32")
              options.precision = DType::F32;
            else if (precision == "fp16")
              options.precision = DType::F16;
            else if (precision == "bf16")
              options.precision = DType::BF16;
            else
              throw Error("precision='" + precision +
                          "': expected fp32, fp16 or bf16");
            std::vector<std::string> notes = locked(
                t, [&] { return t.trainer().exportInference(p, options); });
            for (const std::string &note : notes)
              std::cerr << "mpc: note: " << note << "\n";
          },
          py::arg("path"), py::arg("outputs") = std::vector<std::string>{},
          py::arg("precision") = "fp32",
          "Writes the model users deploy (mpc-run --export-inference): the "
          "forward in inference form on the trained parameters.")
      .def_property_readonly(
          "loss_scale", [](PyTrainer &t) { return t.trainer().lossScale(); },
          "The loss scale the next step uses (1 without loss scaling).")
      .def_property_readonly(
          "lr", [](PyTrainer &t) { return t.trainer().lr(); },
          "The learning rate of the next update.")
      .def_property_readonly(
          "step_count", [](PyTrainer &t) { return t.trainer().stepsDone(); },
          "Optimizer steps done (a resumed run counts on).")
      .def_property_readonly(
          "skipped", [](PyTrainer &t) { return t.lastSkipped(); },
          "Whether the last step was skipped (its gradients overflowed).")
      .def_property_readonly(
          "grad_norm",
          [](PyTrainer &t) -> py::object {
            std::optional<double> norm = t.session().summary().lastGradNorm;
            if (!norm)
              return py::none();
            return py::float_(*norm);
          },
          "The last step's global gradient norm before clipping, as "
          "torch.nn.utils.clip_grad_norm_ returns it (inf or nan when the "
          "step overflowed); None for a step compiled without "
          "--max-grad-norm.")
      .def_property_readonly(
          "skipped_steps", [](PyTrainer &t) { return t.skippedSteps(); },
          "Steps skipped since this Trainer was made.")
      .def_property_readonly(
          "batch", [](PyTrainer &t) { return t.batch(); },
          "Samples per batch (per micro-batch with --grad-accum).")
      .def_property_readonly(
          "micro_batches", [](PyTrainer &t) { return t.microBatches(); },
          "Micro-batches per optimizer step (--grad-accum).")
      .def_property_readonly(
          "inputs",
          [](PyTrainer &t) {
            std::vector<std::string> names;
            for (const DataInputSpec &s : t.inputs())
              names.push_back(s.name);
            return names;
          },
          "The names of the step's data inputs.");
}
