// A tool's command line as one table: for each flag its name, the value it
// takes, the section and help --help lists it under, and what it does with
// the value. The parser, --help's text and the Markdown flag reference
// (docs/flags.md) all read the table, so each flag is written once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace mpc {

/// How a flag takes its value.
enum class FlagArg {
  None,        ///< a switch: --flag; --flag=... is refused
  Bool,        ///< a switch given bare or as --flag=true / --flag=false
  Value,       ///< --flag=VALUE; a bare --flag is refused
  File,        ///< --flag=FILE; bare or empty: "expects a file name"
  ValueOrNext, ///< --flag=VALUE or --flag VALUE (the next argument)
  Next,        ///< -o VALUE: always the next argument
};

/// The value one flag was given, with the number parsers of
/// support/int_parse.h bound to the flag's name for their error lines.
struct FlagValue {
  const std::string &flag; ///< the flag as given, without its value
  const std::string &text; ///< its value ("" for a switch)
  bool on = true;          ///< a switch: false only for --flag=false

  double number() const;                           ///< parseNumberFlag
  int64_t integer(int64_t min, int64_t max) const; ///< parseIntFlag
  size_t byteSize() const;                         ///< parseByteSize
  /// `text` when it is one of `choices`; else an Error
  /// "FLAG: expected a, b or c, got 'text'".
  const std::string &oneOf(std::initializer_list<const char *> choices) const;
};

/// One row of a tool's flag table.
struct Flag {
  const char *name; ///< "--lr", "-o"
  FlagArg arg;
  /// The value as --help writes it after the name: "=F", "=fp16|bf16|fp32",
  /// " FILE"; "" for a switch.
  const char *syntax;
  const char *section; ///< the heading --help lists it under
  /// What it does, its default and its range: sentences that the help
  /// printer wraps to its column.
  const char *help;
  /// Applies the value (to the options the table was built for).
  std::function<void(const FlagValue &)> apply;
  /// The tool's own marks on the flag: mpc-run marks the flags that train;
  /// a compile flag (passes/compile_flags.h) lists the passes that read it.
  std::vector<std::string> marks = {};
  /// Another spelling ("-h" of "--help"), listed beside the name.
  const char *alias = nullptr;
  /// -h, --list-passes: parsing stops after it (the rest is not read).
  bool stops = false;

  bool hasMark(const std::string &mark) const;
};

/// The two rows every tool ends its table with: --help (-h) and
/// --help-markdown (the flag reference, docs/flags.md), setting the flags.
std::vector<Flag> helpFlags(bool &help, bool &helpMarkdown);

/// A command line: the flags and what becomes of the other arguments.
struct CommandLine {
  std::string tool; ///< "mpc-opt": the unknown-flag line points to its --help
  std::vector<Flag> flags;
  /// Every argument that is not a flag, in order.
  std::function<void(const std::string &)> positional;
  /// "-" is an argument (stdin or stdout), not an unknown flag.
  bool dashIsArgument = false;
  /// "--data=" is refused as a missing value rather than applied.
  bool emptyIsMissing = false;
};

/// A flag as it was given on the command line.
struct GivenFlag {
  std::string name;  ///< as given, without the value ("--log-file")
  std::string value; ///< "" for a switch
  const Flag *flag;  ///< its row of CommandLine::flags
};

/// Parses argv[1..argc) in order: each flag's value form is checked
/// (applyFlag) and the flag applied, every other argument goes to
/// `positional`. An Error names the flag: "unknown flag '--x' (see TOOL
/// --help)", "--lr: expects a value (--lr=...)", "--stats: takes no value,
/// got '--stats=1'". Returns the flags given, in order, up to and including
/// one that stops the parse.
std::vector<GivenFlag> parseCommandLine(const CommandLine &line, int argc,
                                        const char *const *argv);

/// The row named `name` (or its alias), or nullptr.
const Flag *findFlag(const std::vector<Flag> &flags, const std::string &name);

/// Checks the value form of `flag` given as `key` with `value` (nullptr:
/// given bare) and applies it: the one place a flag's value is read, for
/// the command line and for mpc-opt's --passes=name{key=value} alike.
void applyFlag(const Flag &flag, const std::string &key,
               const std::string *value, bool emptyIsMissing = false);

/// A heading of the help and the text around its flags.
struct FlagSection {
  const char *name;
  const char *intro = ""; ///< a paragraph before its flags
  const char *outro = ""; ///< a paragraph after them
};

/// The text of a tool's help around its flag table.
struct FlagDocs {
  const char *tool;  ///< "mpc-opt"
  const char *usage; ///< the "usage: ..." lines
  const char *about; ///< what the tool does: a paragraph
  /// The sections in the order --help lists them; a flag names one of them.
  std::vector<FlagSection> sections;
  const char *footer = ""; ///< paragraphs after the last section
};

/// --help's text: usage, about, then each section's flags in two columns
/// (the flag and its value, the help wrapped beside it), then the footer.
std::string flagHelpText(const std::vector<Flag> &flags, const FlagDocs &docs);
/// The same as Markdown: a "## TOOL" heading, the usage as a text block,
/// each section a "### " heading and a table of its flags.
std::string flagMarkdown(const std::vector<Flag> &flags, const FlagDocs &docs);

} // namespace mpc
