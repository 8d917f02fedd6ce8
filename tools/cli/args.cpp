// Flag parsing for the `tessera` subcommands; see tools/cli/args.h.
#include "tools/cli/args.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "tessera/core/error.h"

namespace tessera::cli {

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::declare(Spec spec) {
  // parse() would give a repeated name's value to the last declaration and get() read the first.
  for (const Spec& s : specs_)
    for (const std::string& taken : {s.name, s.alias})
      if (!taken.empty() && (taken == spec.name || taken == spec.alias))
        throw Error("internal error: `tessera " + command_ + "` declares option " + taken + " twice");
  specs_.push_back(std::move(spec));
}

void ArgParser::option(const std::string& name, const std::string& metavar, const std::string& help,
                       const std::string& default_value, const std::string& alias) {
  declare({name, alias, metavar, help, default_value, true, false, false, ""});
}

void ArgParser::flag(const std::string& name, const std::string& help) {
  declare({name, "", "", help, "", false, false, false, ""});
}

void ArgParser::optional_value_option(const std::string& name, const std::string& metavar, const std::string& help,
                                      const std::string& default_value, const std::string& implicit_value) {
  declare({name, "", "[" + metavar + "]", help, default_value, true, false, false, implicit_value});
}

void ArgParser::list_option(const std::string& name, const std::string& metavar, const std::string& help) {
  declare({name, "", metavar + " ...", help, "", true, false, true, ""});
}

bool ArgParser::parse(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i], inline_value;
    bool has_inline = false;
    if (arg == "-h" || arg == "--help") {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline = true;
    }
    Spec* spec = nullptr;
    for (Spec& s : specs_)
      if (s.name == arg || (!s.alias.empty() && s.alias == arg)) spec = &s;
    if (!spec) throw UsageError(detail::concat("unknown option '", arg, "' (see `tessera ", command_, " --help`)"));
    spec->given = true;
    if (!spec->takes_value) {
      if (has_inline) throw UsageError(detail::concat("option ", spec->name, " takes no value"));
      spec->value = "1";
      continue;
    }
    if (has_inline) {
      spec->value = inline_value;
    } else if (spec->takes_list) {
      spec->value.clear();
      while (i + 1 < argv.size() && argv[i + 1].rfind('-', 0) != 0) {
        if (!spec->value.empty()) spec->value += ' ';
        spec->value += argv[++i];
      }
    } else if (!spec->implicit.empty() && (i + 1 == argv.size() || argv[i + 1].rfind('-', 0) == 0)) {
      spec->value = spec->implicit;
    } else {
      if (i + 1 == argv.size())
        throw UsageError(detail::concat("option ", spec->name, " needs a value (", spec->metavar, ")"));
      spec->value = argv[++i];
    }
  }
  return true;
}

const ArgParser::Spec& ArgParser::find(const std::string& name) const {
  for (const Spec& s : specs_)
    if (s.name == name) return s;
  throw Error("internal error: `tessera " + command_ + "` reads option " + name + ", which it never declared");
}

const std::string& ArgParser::get(const std::string& name) const { return find(name).value; }
bool ArgParser::given(const std::string& name) const { return find(name).given; }

int64_t ArgParser::get_int(const std::string& name) const {
  const std::string& v = get(name);
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {}
  throw UsageError("option " + name + ": expected an integer, got '" + v + "'");
}

bool parse_number(const std::string& text, double* out) {
  try {
    size_t used = 0;
    *out = std::stod(text, &used);
    return used == text.size();
  } catch (const std::exception&) { return false; }
}

double ArgParser::get_double(const std::string& name) const {
  const std::string& v = get(name);
  double x = 0;
  if (!parse_number(v, &x)) throw UsageError(detail::concat("option ", name, ": expected a number, got '", v, "'"));
  return x;
}

const std::string& ArgParser::require(const std::string& name) const {
  const Spec& s = find(name);
  if (s.value.empty())
    throw UsageError(
        detail::concat("option ", name, " ", s.metavar, " is required (see `tessera ", command_, " --help`)"));
  return s.value;
}

std::string ArgParser::dest(const Spec& s) {
  std::string key = s.name.substr(2);  // "--batch-size" -> "batch_size", argparse's dest name
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::vector<ArgParser::Help> ArgParser::help_entries() const {
  std::vector<Help> out;
  for (const Spec& s : specs_) {
    std::string flag = (s.alias.empty() ? "" : s.alias + ", ") + s.name;
    if (s.takes_value) flag += " " + s.metavar;
    out.push_back({flag, s.help, s.takes_value && !s.given ? s.value : "", dest(s)});
  }
  return out;
}

std::string ArgParser::usage() const {
  std::ostringstream out;
  out << "usage: tessera " << command_ << " [options]\n\n" << summary_ << "\n\noptions:\n";
  for (const Help& h : help_entries()) {
    const std::string lhs = "  " + h.flag;
    out << lhs << std::string(lhs.size() < 30 ? 30 - lhs.size() : 1, ' ') << h.help;
    if (!h.default_value.empty()) out << " (default: " << h.default_value << ")";
    out << "\n";
  }
  out << "  -h, --help                  show this help\n";
  return out.str();
}

std::vector<std::pair<std::string, std::string>> ArgParser::values() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Spec& s : specs_) out.emplace_back(dest(s), s.takes_value ? s.value : (s.given ? "true" : "false"));
  return out;
}

}  // namespace tessera::cli
