// The flag table (support/flag_table.h): the generic parser's value forms
// and messages, the help and Markdown printers, and the compile-flag table
// (passes/compile_flags.h) that mpc-opt's command line and pass options
// share.
#include "passes/compile_flags.h"
#include "passes/registry.h"
#include "support/diagnostics.h"
#include "support/flag_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <sstream>

using namespace mpc;

namespace {

/// A small tool: one flag of each kind.
struct Toy {
  bool on = false, stopped = false;
  std::string value, next, either, file;
  bool sw = false;
  std::vector<std::string> positional;
  /// The line parsed: GivenFlag::flag points into its rows.
  std::unique_ptr<CommandLine> line;
};

CommandLine toyLine(Toy &t, bool emptyIsMissing = false) {
  CommandLine line;
  line.tool = "toy";
  line.emptyIsMissing = emptyIsMissing;
  line.positional = [&t](const std::string &a) { t.positional.push_back(a); };
  line.flags = {
      {"--on", FlagArg::None, "", "a", "a switch",
       [&t](auto &) { t.on = true; }},
      {"--sw", FlagArg::Bool, "", "a", "a switch that may be true/false",
       [&t](const FlagValue &v) { t.sw = v.on; }},
      {"--value",
       FlagArg::Value,
       "=V",
       "a",
       "a value",
       [&t](const FlagValue &v) { t.value = v.text; },
       {"m1"}},
      {"-o", FlagArg::Next, " FILE", "b", "the next argument",
       [&t](const FlagValue &v) { t.file = v.text; }},
      {"--either", FlagArg::ValueOrNext, "=X", "b", "either form",
       [&t](const FlagValue &v) { t.either = v.text; }},
      {"--stop",
       FlagArg::None,
       "",
       "b",
       "stops",
       [&t](auto &) { t.stopped = true; },
       {},
       "-s",
       /*stops=*/true},
      {"--file", FlagArg::File, "=FILE", "b", "a file name",
       [&t](const FlagValue &v) { t.value = v.text; }},
  };
  return line;
}

std::vector<GivenFlag> parse(Toy &t, std::vector<const char *> args,
                             bool emptyIsMissing = false) {
  args.insert(args.begin(), "toy");
  t.line = std::make_unique<CommandLine>(toyLine(t, emptyIsMissing));
  return parseCommandLine(*t.line, int(args.size()), args.data());
}

std::string errorOf(std::vector<const char *> args,
                    bool emptyIsMissing = false) {
  Toy t;
  try {
    parse(t, args, emptyIsMissing);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(FlagTable, AppliesEachFormInOrder) {
  Toy t;
  auto given = parse(t, {"model", "--on", "--sw=false", "--value=a=b", "-o",
                         "out", "--either", "x", "--either=y"});
  EXPECT_TRUE(t.on);
  EXPECT_FALSE(t.sw);
  EXPECT_EQ(t.value, "a=b"); // only the first '=' splits
  EXPECT_EQ(t.file, "out");
  EXPECT_EQ(t.either, "y");
  EXPECT_EQ(t.positional, (std::vector<std::string>{"model"}));
  ASSERT_EQ(given.size(), 6u);
  EXPECT_EQ(given[2].name, "--value");
  EXPECT_EQ(given[2].value, "a=b");
  EXPECT_TRUE(given[2].flag->hasMark("m1"));
  // "-" (stdin, stdout) is an argument where the tool says so.
  Toy d;
  CommandLine line = toyLine(d);
  line.dashIsArgument = true;
  const char *argv[] = {"toy", "-", "-o", "-"};
  parseCommandLine(line, 4, argv);
  EXPECT_EQ(d.positional, (std::vector<std::string>{"-"}));
  EXPECT_EQ(d.file, "-");
}

TEST(FlagTable, RefusesEachWrongForm) {
  EXPECT_EQ(errorOf({"--bogus"}), "unknown flag '--bogus' (see toy --help)");
  EXPECT_EQ(errorOf({"--bogus=1"}),
            "unknown flag '--bogus=1' (see toy --help)");
  EXPECT_EQ(errorOf({"-"}), "unknown flag '-' (see toy --help)");
  EXPECT_EQ(errorOf({"--on=1"}), "--on: takes no value, got '--on=1'");
  EXPECT_EQ(errorOf({"--sw=yes"}),
            "--sw: a switch, given bare or as true/false, got 'yes'");
  EXPECT_EQ(errorOf({"--value"}), "--value: expects a value (--value=...)");
  EXPECT_EQ(errorOf({"--value="}), "");
  EXPECT_EQ(errorOf({"--value="}, /*emptyIsMissing=*/true),
            "--value: expects a value (--value=...)");
  EXPECT_EQ(errorOf({"-o"}), "-o: expects a value (-o VALUE)");
  EXPECT_EQ(errorOf({"-o", ""}), "-o: expects a value (-o VALUE)");
  EXPECT_EQ(errorOf({"-o=x"}), "unknown flag '-o=x' (see toy --help)");
  EXPECT_EQ(errorOf({"--either"}),
            "--either: expects a value (--either VALUE)");
  EXPECT_EQ(errorOf({"--either="}), "--either: expects a value");
  EXPECT_EQ(errorOf({"--either", ""}), "--either: expects a value");
  EXPECT_EQ(errorOf({"--file"}), "--file: expects a file name (--file=FILE)");
  EXPECT_EQ(errorOf({"--file="}), "--file: expects a file name (--file=FILE)");
  // A value that looks like a flag is the value of a flag that takes the
  // next argument.
  EXPECT_EQ(errorOf({"-o", "--bogus"}), "");
}

TEST(FlagTable, StopsAfterAStoppingFlag) {
  Toy t;
  auto given = parse(t, {"-s", "--bogus"});
  EXPECT_TRUE(t.stopped);
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0].name, "-s");
  // A bad flag before it is still refused.
  EXPECT_EQ(errorOf({"--bogus", "--stop"}),
            "unknown flag '--bogus' (see toy --help)");
}

TEST(FlagTable, HelpListsSectionsInOrderInTwoColumns) {
  Toy t;
  CommandLine line = toyLine(t);
  line.flags[0].help = "a long help text that the printer must wrap because "
                       "it runs well past the seventy-eight columns of a "
                       "terminal line";
  FlagDocs docs{"toy",
                "usage: toy [options]",
                "Does toy things.",
                {{"b", "Intro of b.", "Outro of b."}, {"a"}}};
  std::string help = flagHelpText(line.flags, docs);
  EXPECT_EQ(help.rfind("usage: toy [options]\n\nDoes toy things.\n", 0), 0u)
      << help;
  size_t b = help.find("\nb:\nIntro of b.\n"), a = help.find("\na:\n");
  ASSERT_NE(b, std::string::npos) << help;
  ASSERT_NE(a, std::string::npos) << help;
  EXPECT_LT(b, a);
  EXPECT_NE(help.find("  -o FILE               the next argument\n"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("  -s, --stop            stops\n"), std::string::npos)
      << help;
  EXPECT_NE(help.find("Outro of b.\n"), std::string::npos);
  std::istringstream lines(help);
  std::string l;
  int wrapped = 0;
  while (std::getline(lines, l)) {
    EXPECT_LE(l.size(), 78u) << l;
    if (l.rfind(std::string(24, ' '), 0) == 0)
      ++wrapped;
  }
  EXPECT_GE(wrapped, 1) << help;
  // A section the docs do not list is still printed, under its own name.
  line.flags[0].section = "unlisted";
  EXPECT_NE(flagHelpText(line.flags, docs).find("\nunlisted:\n  --on"),
            std::string::npos);
}

TEST(FlagTable, MarkdownEscapesTablesAndEmphasis) {
  Toy t;
  CommandLine line = toyLine(t);
  line.flags[2].syntax = "=a|b";
  line.flags[2].help = "x*y and a|b, `c|d`, snake_case _x_";
  FlagDocs docs{"toy", "usage: toy", "- starts like a list", {{"a"}, {"b"}}};
  std::string md = flagMarkdown(line.flags, docs);
  EXPECT_NE(md.find("## toy\n\n```text\nusage: toy\n```\n\n\\- starts"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("### toy: a\n\n| Flag | What it does |\n|---|---|\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| `--value=a\\|b` | x\\*y and a\\|b, `c\\|d`, snake_case "
                    "\\_x\\_ |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| `-s`, `--stop` | stops |"), std::string::npos) << md;
}

// The compile flags: one table for the command line and pass options.

TEST(CompileFlags, EveryRowIsDocumentedAndReadByAPass) {
  std::set<std::string> names;
  for (const Flag &f : compileFlagTable()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " twice";
    EXPECT_EQ(std::string(f.name).rfind("--", 0), 0u) << f.name;
    EXPECT_NE(std::string(f.help), "") << f.name;
    EXPECT_NE(std::string(f.section), "") << f.name;
    EXPECT_EQ(f.arg == FlagArg::Bool, std::string(f.syntax).empty()) << f.name;
    // Its marks are the passes that read it: each one a pass of the table,
    // and the flag among that pass's options.
    EXPECT_FALSE(f.marks.empty()) << f.name << " is read by no pass";
    for (const std::string &p : f.marks) {
      const PassInfo *pass = findPass(p);
      ASSERT_NE(pass, nullptr) << f.name << ": no pass '" << p << "'";
      std::vector<std::string> options = passOptionNames(*pass);
      EXPECT_NE(std::find(options.begin(), options.end(),
                          std::string(f.name).substr(2)),
                options.end());
    }
    EXPECT_EQ(passesReadingFlag(f.name), f.marks);
  }
  EXPECT_TRUE(passesReadingFlag("--emit").empty());
}

TEST(CompileFlags, PassOptionMeansWhatTheFlagMeans) {
  CompileOptions viaFlag, viaOption;
  std::string bf16 = "bf16", lr = "0.5";
  ASSERT_TRUE(applyCompileFlag(viaFlag, "--precision", &bf16));
  ASSERT_TRUE(applyCompileFlag(viaFlag, "--lr", &lr));
  PipelineEntry autocast{findPass("autocast"), {{"precision", "bf16"}}};
  PipelineEntry optimizer{findPass("optimizer"), {{"lr", "0.5"}}};
  viaOption = withPassOptions(withPassOptions(viaOption, autocast), optimizer);
  EXPECT_EQ(viaOption.precision, viaFlag.precision);
  EXPECT_EQ(viaOption.precision, DType::BF16);
  EXPECT_EQ(viaOption.lr, 0.5);
  EXPECT_TRUE(viaOption.lrSet);
  std::string bad = "fp8";
  CompileOptions o;
  EXPECT_FALSE(applyCompileFlag(o, "--emit", &bad));
  try {
    applyCompileFlag(o, "--precision", &bad);
    ADD_FAILURE() << "fp8 accepted";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "--precision: expected fp16, bf16 or fp32, got 'fp8'");
  }
  // A switch: bare, or true/false.
  EXPECT_TRUE(applyCompileFlag(o, "--nesterov", nullptr));
  EXPECT_TRUE(o.nesterov);
  std::string no = "false";
  EXPECT_TRUE(applyCompileFlag(o, "--nesterov", &no));
  EXPECT_FALSE(o.nesterov);
}

} // namespace
