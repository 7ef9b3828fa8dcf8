// mpc-opt's command line (tools/mpc-opt/opt_flags.h): its own flags (output,
// passes, reports) in the table below, the compile flags in
// passes/compile_flags.cpp's; --help and --help-markdown print both.
#include "tools/mpc-opt/opt_flags.h"

#include "passes/compile_flags.h"
#include "support/diagnostics.h"
#include "support/flag_table.h"

#include <algorithm>

namespace mpc {
namespace {

/// mpc-opt's own flags, applied to `f`.
std::vector<Flag> toolFlags(OptFlags &f) {
  using V = const FlagValue &;
  constexpr FlagArg kSwitch = FlagArg::None, kValue = FlagArg::Value;
  const char *output = "output", *passes = "passes and reports";
  std::vector<Flag> flags = {
      {"-o", FlagArg::Next, " FILE", output,
       "the output file (\"-\": stdout; default stdout for text)",
       [&f](V v) {
         f.output = v.text;
         f.outputGiven = true;
       }},
      {"--emit", kValue, "=onnx|text|step", output,
       "binary ONNX (default), text of every graph, or the step as a plain "
       "functional model",
       [&f](V v) {
         f.emit = v.oneOf({"onnx", "text", "step"});
       }},
      {"--external-data", kSwitch, "", output,
       "keep the tensors' bytes in FILE.data beside -o FILE (ONNX external "
       "data, as onnx.save_model's save_as_external_data); a model that would "
       "pass 2 GiB is always written so",
       [&f](V) { f.externalData = true; }},
      {"--passes", kValue, "=a,b{k=v},c", passes,
       "run exactly these passes (default: all, in order); a pass's options "
       "{k=v} are the compile flags it reads (--list-passes)",
       [&f](V v) {
         f.passes = v.text;
         f.passesGiven = true;
       }},
      {"--list-passes",
       kSwitch,
       "",
       passes,
       "print the pass table, each pass with its options",
       [&f](V) { f.listPasses = true; },
       {},
       nullptr,
       /*stops=*/true},
      {"--print-after-all", kSwitch, "", passes,
       "print the model (text) after every pass, on stderr",
       [&f](V) { f.printAfterAll = true; }},
      {"--print-after", kValue, "=PASS", passes,
       "print the model after PASS, on stderr",
       [&f](V v) { f.printAfter = v.text; }},
      {"--print-types", kSwitch, "", passes,
       "append \"// type: NAME : TYPE\" lines to text output",
       [&f](V) { f.printTypes = true; }},
      {"--no-verify-each", kSwitch, "", passes,
       "do not verify the graph after every pass",
       [&f](V) { f.verifyEach = false; }},
      {"--split-input-file", kSwitch, "", passes,
       "process chunks separated by \"// -----\" separately",
       [&f](V) { f.splitInputFile = true; }},
      {"--stats", kSwitch, "", passes, "print pass statistics on stderr",
       [&f](V) { f.stats = true; }},
      {"--time-passes", kSwitch, "", passes,
       "print the CPU and wall time of every pass, the verifier, import and "
       "export on stderr (a table)",
       [&f](V) { f.timePasses = true; }},
      {"--explain", kSwitch, "", passes,
       "print each node's precision and the rule that chose it (stdout; "
       "stderr when -o - writes the model)",
       [&f](V) { f.explain = true; }},
      {"--dot", FlagArg::File, "=FILE", passes,
       "write the step graph as Graphviz, coloured by precision, Casts marked "
       "(dot -Tsvg FILE)",
       [&f](V v) { f.dotFile = v.text; }},
      {"--report", kValue, "=memory|kernels", passes,
       "print the step's memory plan by class, next to the fp32 baseline; "
       "or its kernel launches and bytes read/written per kernel class "
       "(stdout; stderr when -o - is the model)",
       [&f](V v) {
         if (v.text == "memory")
           f.reportMemory = true;
         else if (v.text == "kernels")
           f.reportKernels = true;
         else
           throw Error("--report: expected 'memory' or 'kernels', got '" +
                       v.text + "'");
       }},
      {"--report-json", FlagArg::File, "=FILE", passes,
       "write the same plan as JSON", [&f](V v) { f.reportJson = v.text; }},
  };
  std::vector<Flag> helpRows = helpFlags(f.help, f.helpMarkdown);
  flags.insert(flags.end(), helpRows.begin(), helpRows.end());
  return flags;
}

/// Every flag mpc-opt takes: its own, then the compile flags.
std::vector<Flag> allFlags(OptFlags &f) {
  std::vector<Flag> flags = toolFlags(f);
  std::vector<Flag> compile = compileFlags(f.options);
  flags.insert(flags.end(), compile.begin(), compile.end());
  return flags;
}

const FlagDocs &optDocs() {
  static const FlagDocs docs{
      "mpc-opt",
      "usage: mpc-opt MODEL [-o OUT] [options]",
      R"(Compiles MODEL (binary ONNX or ONNX text, a forward graph with a scalar loss)
into one mixed-precision training step and writes it as ONNX.)",
      {{"output"},
       {"passes and reports"},
       {"memory"},
       {"precision"},
       {"loss scaling"},
       {"optimizer"},
       {"learning-rate schedule"},
       {"data parallel"},
       {"the loss"},
       {"parameters and shapes"},
       {"help"}},
      R"(Integer flags are decimal and bounded: step counts (--growth-interval,
--warmup-steps, --total-steps, --lr-*-steps, --lr-step-size, --lr-cycles,
--lr-timescale, --lr-patience, --lr-cooldown) at most 10^12, --grad-accum at
most 65536, --batch and each --input-shape dimension at most 2^31-1.)"};
  return docs;
}

} // namespace

std::string optUsage() {
  OptFlags scratch;
  return flagHelpText(allFlags(scratch), optDocs());
}

std::string optHelpMarkdown() {
  OptFlags scratch;
  return flagMarkdown(allFlags(scratch), optDocs());
}

OptFlags parseOptFlags(int argc, const char *const *argv) {
  OptFlags f;
  CompileOptions &o = f.options;
  CommandLine line;
  line.tool = "mpc-opt";
  line.flags = allFlags(f);
  line.dashIsArgument = true; // -o - and the model from stdin
  line.positional = [&f](const std::string &arg) {
    if (!f.input.empty())
      throw Error("unexpected argument '" + arg + "' (one model at a time)");
    f.input = arg;
  };
  for (const GivenFlag &g : parseCommandLine(line, argc, argv)) {
    // --precision=fp32 asks for no casts, which a list without autocast
    // gives as well.
    if (g.name.rfind("--", 0) == 0 &&
        !(g.name == "--precision" && g.value == "fp32"))
      f.given.push_back(g.name);
  }
  if (f.help || f.helpMarkdown || f.listPasses)
    return f;
  if (f.input.empty())
    throw Error("no input model (usage: mpc-opt MODEL -o OUT)");
  checkCompileFlags(o, f.given);
  if ((f.reportMemory || f.reportKernels || !f.reportJson.empty()) &&
      f.splitInputFile)
    throw Error("--report: cannot be combined with --split-input-file");
  if (!f.dotFile.empty() && f.splitInputFile)
    throw Error("--dot: cannot be combined with --split-input-file (one "
                "graph per file)");
  if (!f.outputGiven) {
    if (f.emit != "text")
      throw Error("missing -o OUT (binary output is not written to a "
                  "terminal; use -o - to force stdout)");
    f.output = "-";
  }
  if (f.externalData && (f.emit == "text" || f.output == "-"))
    throw Error("--external-data: writes binary ONNX to a file (-o FILE, "
                "the data file beside it)");
  if (f.externalData && f.splitInputFile)
    throw Error("--external-data: cannot be combined with --split-input-file");
  // Only --explain and --dot read the precision map (never exported), and
  // only --stats the memory plan's numbers (the plan is not exported).
  f.options.recordPrecision = f.explain || !f.dotFile.empty();
  f.options.planMemory = f.stats;
  return f;
}

} // namespace mpc
