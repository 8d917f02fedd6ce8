// Command-line flags for the `tessera` subcommands: each command declares its flags with a help
// line and a default, then parses argv. `--help` prints the generated usage; unknown flags,
// missing values, values of the wrong type and missing required options are UsageErrors naming
// the flag (exit status 2, as argparse).
//   ArgParser p("bench", "Measure images/s and peak memory of a model");
//   p.option("--batch", "B", "images per step", "8");
//   p.flag("--json", "print one JSON object");
//   if (!p.parse(argv)) return 0;   // --help was printed
//   int64_t b = p.get_int("--batch");
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/error.h"

namespace tessera::cli {

// The command line itself is wrong (not the files or data it names): `tessera` exits with 2 for
// it, as Python's argparse does, and with 1 for every other failure.
class UsageError : public Error {
 public:
  using Error::Error;
};

// The whole of `text` as a number; false for anything else ("", "1x", "six").
bool parse_number(const std::string& text, double* out);

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);

  // Declaring a name or alias twice is an internal error (tessera::Error).
  // A flag that takes a value. `alias` is an optional short form ("-b"). An empty default makes
  // get() return "" unless given; required options are checked by the command.
  void option(const std::string& name, const std::string& metavar, const std::string& help,
              const std::string& default_value = "", const std::string& alias = "");
  // A switch without a value.
  void flag(const std::string& name, const std::string& help);
  // A flag whose value may be left out: given alone (the next argument is another flag, or none)
  // it takes `implicit_value` (timm's bare `--amp` next to our `--amp bf16`).
  void optional_value_option(const std::string& name, const std::string& metavar, const std::string& help,
                             const std::string& default_value, const std::string& implicit_value);
  // A flag that takes every following argument up to the next one that starts with '-' (argparse's
  // nargs='*', as timm's --model-kwargs depth=6 embed_dim=128); get() returns them joined by spaces.
  void list_option(const std::string& name, const std::string& metavar, const std::string& help);

  // Returns false when --help/-h was given (usage printed to stdout); throws UsageError for
  // unknown flags or a missing value. A repeated flag takes its last value (as Python's argparse),
  // so a script's defaults can be overridden by arguments appended after them.
  bool parse(const std::vector<std::string>& argv);

  const std::string& get(const std::string& name) const;
  bool given(const std::string& name) const;                          // set on the command line (not defaulted)
  bool is_set(const std::string& name) const { return given(name); }  // for switches
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  // get_int/get_double throw UsageError for a value of another type.
  // "--name" must have been given a non-empty value, else a UsageError that says so.
  const std::string& require(const std::string& name) const;

  // Each option as usage() lists it: "-b, --batch-size B", its help, its default ("" for none, and
  // for a switch) and its dest name ("batch_size").
  struct Help {
    std::string flag, help, default_value, dest;
  };
  std::vector<Help> help_entries() const;
  std::string usage() const;
  // Every option with its effective value under argparse's dest name ("batch_size"), in
  // declaration order: the args.yaml of a training run.
  std::vector<std::pair<std::string, std::string>> values() const;

 private:
  struct Spec {
    std::string name, alias, metavar, help, value;
    bool takes_value = true, given = false, takes_list = false;
    std::string implicit;  // optional_value_option: the value when given alone
  };
  void declare(Spec spec);
  const Spec& find(const std::string& name) const;
  static std::string dest(const Spec& s);
  std::string command_, summary_;
  std::vector<Spec> specs_;
};

}  // namespace tessera::cli
