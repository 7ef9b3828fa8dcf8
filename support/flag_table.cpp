// A tool's flag table: the parser, --help and the Markdown reference
// (support/flag_table.h).
#include "support/flag_table.h"

#include "support/diagnostics.h"
#include "support/int_parse.h"

#include <algorithm>
#include <cctype>

namespace mpc {

double FlagValue::number() const { return parseNumberFlag(flag, text); }

int64_t FlagValue::integer(int64_t min, int64_t max) const {
  return parseIntFlag(flag, text, min, max);
}

size_t FlagValue::byteSize() const { return parseByteSize(flag, text); }

const std::string &
FlagValue::oneOf(std::initializer_list<const char *> choices) const {
  std::string list;
  size_t i = 0;
  for (const char *c : choices) {
    if (text == c)
      return text;
    list += std::string(i == 0                    ? ""
                        : i + 1 == choices.size() ? " or "
                                                  : ", ") +
            c;
    ++i;
  }
  throw Error(flag + ": expected " + list + ", got '" + text + "'");
}

bool Flag::hasMark(const std::string &mark) const {
  return std::find(marks.begin(), marks.end(), mark) != marks.end();
}

const Flag *findFlag(const std::vector<Flag> &flags, const std::string &name) {
  for (const Flag &f : flags)
    if (name == f.name || (f.alias && name == f.alias))
      return &f;
  return nullptr;
}

void applyFlag(const Flag &flag, const std::string &key,
               const std::string *value, bool emptyIsMissing) {
  static const std::string kNone;
  bool on = true;
  switch (flag.arg) {
  case FlagArg::None:
    if (value)
      throw Error(key + ": takes no value, got '" + key + "=" + *value + "'");
    break;
  case FlagArg::Bool:
    // A switch: given bare, or as true/false (a pass option's form).
    if (value && *value != "true" && *value != "false")
      throw Error(key + ": a switch, given bare or as true/false, got '" +
                  *value + "'");
    on = !value || *value == "true";
    break;
  case FlagArg::Value:
    if (!value || (emptyIsMissing && value->empty()))
      throw Error(key + ": expects a value (" + key + "=...)");
    break;
  case FlagArg::File:
    if (!value || value->empty())
      throw Error(key + ": expects a file name (" + key + "=FILE)");
    break;
  case FlagArg::ValueOrNext:
    if (!value || value->empty())
      throw Error(key + ": expects a value");
    break;
  case FlagArg::Next:
    // -o "": an empty word names no file (it is not "no -o").
    if (!value || value->empty())
      throw Error(key + ": expects a value (" + key + " VALUE)");
    break;
  }
  flag.apply(FlagValue{key, value ? *value : kNone, on});
}

std::vector<GivenFlag> parseCommandLine(const CommandLine &line, int argc,
                                        const char *const *argv) {
  std::vector<GivenFlag> given;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], key = arg, val;
    bool hasVal = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      key = arg.substr(0, eq);
      val = arg.substr(eq + 1);
      hasVal = true;
    }
    const Flag *flag = findFlag(line.flags, key);
    if (!flag) {
      if (!arg.empty() && arg[0] == '-' && !(line.dashIsArgument && arg == "-"))
        throw Error("unknown flag '" + arg + "' (see " + line.tool +
                    " --help)");
      line.positional(arg);
      continue;
    }
    // The value in the next argument: -o FILE, --input NAME=FILE.
    bool fromNext = flag->arg == FlagArg::Next ||
                    (flag->arg == FlagArg::ValueOrNext && !hasVal);
    if (fromNext && hasVal)
      throw Error("unknown flag '" + arg + "' (see " + line.tool + " --help)");
    if (fromNext) {
      if (i + 1 >= argc)
        throw Error(key + ": expects a value (" + key + " VALUE)");
      val = argv[++i];
      hasVal = true;
    }
    applyFlag(*flag, key, hasVal ? &val : nullptr, line.emptyIsMissing);
    given.push_back({key, val, flag});
    if (flag->stops)
      break;
  }
  return given;
}

namespace {

constexpr size_t kHelpColumn = 24; ///< where a flag's help starts
constexpr size_t kHelpWidth = 78;

/// `line` (a prefix, padded to `indent`) followed by `text`'s words, in
/// lines of at most `width` characters (a longer word alone on its line),
/// each after the first indented by `indent` blanks.
std::string wrap(std::string line, const std::string &text, size_t indent,
                 size_t width) {
  std::string out;
  bool fresh = true; // nothing after the prefix yet
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find(' ', at), text.size());
    std::string word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty())
      continue;
    if (!fresh && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent, ' ');
      fresh = true;
    }
    line += (fresh ? "" : " ") + word;
    fresh = false;
  }
  return out + line + "\n";
}

std::string flagColumn(const Flag &f) {
  return (f.alias ? std::string(f.alias) + ", " : "") + f.name + f.syntax;
}

/// Every listed section's flags, then any flag of an unlisted section under
/// its own heading (a table and its docs out of step: still printed).
std::vector<std::pair<FlagSection, std::vector<const Flag *>>>
bySection(const std::vector<Flag> &flags, const FlagDocs &docs) {
  std::vector<std::pair<FlagSection, std::vector<const Flag *>>> out;
  for (const FlagSection &s : docs.sections)
    out.push_back({s, {}});
  for (const Flag &f : flags) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto &s) {
      return std::string(s.first.name) == f.section;
    });
    if (it == out.end()) {
      out.push_back({FlagSection{f.section}, {}});
      it = out.end() - 1;
    }
    it->second.push_back(&f);
  }
  return out;
}

std::string endLine(std::string text) {
  if (!text.empty() && text.back() != '\n')
    text += '\n';
  return text;
}

/// `text` with Markdown's special characters escaped outside its `code`
/// spans; inside them only '|' (a table's column separator).
std::string markdownEscape(const std::string &text) {
  std::string out;
  bool code = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '`') {
      code = !code;
      out += c;
      continue;
    }
    if (c == '|') {
      out += "\\|";
      continue;
    }
    if (code) {
      out += c;
      continue;
    }
    bool inWord = c == '_' && i > 0 && i + 1 < text.size() &&
                  std::isalnum((unsigned char)text[i - 1]) &&
                  std::isalnum((unsigned char)text[i + 1]);
    if (std::string("\\*_<>[]").find(c) != std::string::npos && !inWord)
      out += '\\';
    out += c;
  }
  return out;
}

/// A paragraph of Markdown that does not start as a list item or heading.
std::string markdownParagraph(const std::string &text) {
  std::string out = markdownEscape(text);
  if (!out.empty() && std::string("-+#").find(out[0]) != std::string::npos)
    out.insert(0, "\\");
  size_t digits = 0;
  while (digits < out.size() && std::isdigit((unsigned char)out[digits]))
    ++digits;
  if (digits > 0 && digits < out.size() &&
      (out[digits] == '.' || out[digits] == ')'))
    out.insert(digits, "\\");
  return out;
}

/// Hand-wrapped paragraphs (blank lines between them) as Markdown
/// paragraphs, each on one line.
std::string markdownParagraphs(const std::string &text) {
  std::string out, para;
  auto flush = [&] {
    if (!para.empty())
      out += markdownParagraph(para) + "\n\n";
    para.clear();
  };
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos) {
      flush();
      continue;
    }
    para += (para.empty() ? "" : " ") + line.substr(first);
  }
  flush();
  return out;
}

} // namespace

std::string flagHelpText(const std::vector<Flag> &flags, const FlagDocs &docs) {
  std::string out = endLine(docs.usage) + "\n" + endLine(docs.about);
  for (const auto &[section, rows] : bySection(flags, docs)) {
    if (rows.empty())
      continue;
    out += "\n";
    if (*section.name)
      out += std::string(section.name) + ":\n";
    out += endLine(section.intro);
    for (const Flag *f : rows) {
      std::string column = "  " + flagColumn(*f);
      if (column.size() + 2 > kHelpColumn) {
        out += column + "\n";
        column.clear();
      }
      column.resize(kHelpColumn, ' ');
      out += wrap(column, f->help, kHelpColumn, kHelpWidth);
    }
    if (*section.outro)
      out += "\n" + endLine(section.outro);
  }
  if (*docs.footer)
    out += "\n" + endLine(docs.footer);
  return out;
}

std::string flagMarkdown(const std::vector<Flag> &flags, const FlagDocs &docs) {
  std::string out = "## " + std::string(docs.tool) + "\n\n```text\n" +
                    endLine(docs.usage) + "```\n\n" +
                    markdownParagraphs(docs.about);
  for (const auto &[section, rows] : bySection(flags, docs)) {
    if (rows.empty())
      continue;
    out += "### " + std::string(docs.tool) + ": " + section.name + "\n\n" +
           markdownParagraphs(section.intro);
    out += "| Flag | What it does |\n|---|---|\n";
    for (const Flag *f : rows) {
      std::string name = "`" + std::string(f->name) + f->syntax + "`";
      if (f->alias)
        name = "`" + std::string(f->alias) + "`, " + name;
      out += "| " + markdownEscape(name) + " | " + markdownEscape(f->help) +
             " |\n";
    }
    out += "\n" + markdownParagraphs(section.outro);
  }
  out += markdownParagraphs(docs.footer);
  return out;
}

std::vector<Flag> helpFlags(bool &help, bool &helpMarkdown) {
  return {{"--help",
           FlagArg::None,
           "",
           "help",
           "print this help",
           [&help](const FlagValue &) { help = true; },
           {},
           "-h",
           /*stops=*/true},
          {"--help-markdown",
           FlagArg::None,
           "",
           "help",
           "print this help as Markdown (the flag reference, docs/flags.md)",
           [&helpMarkdown](const FlagValue &) { helpMarkdown = true; },
           {},
           nullptr,
           /*stops=*/true}};
}

} // namespace mpc
