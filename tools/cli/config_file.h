// -c/--config FILE: a YAML file of flag values, read as timm's train.py reads its config (and the
// args.yaml of a run, Tessera's or timm's): each key is a flag's argparse dest name ("batch_size"
// for --batch-size), the values become the flags' defaults and the command line overrides them.
// Keys the command does not know are listed once on stderr and otherwise ignored; a value of the
// wrong type is an error naming the file, the key and what was expected.
//
// A command describes its flags once (ConfigKey); the same description checks a config's values
// and types the values the command writes back to args.yaml (setting_value).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tessera/train/output.h"

namespace tessera::cli {

enum class ConfigType {
  Int,         // an integer
  Float,       // a number
  String,      // text (a number or boolean in the file is taken as its text)
  Switch,      // a flag without a value: true gives it, false leaves it off
  OnOff,       // a boolean the flag spells on / off (--tf32)
  Numbers,     // a list of numbers, given to the flag comma-separated (--mean 0.5,0.5,0.5)
  NumberArgs,  // a list of numbers, given to the flag as separate arguments (--opt-betas 0.9 0.999)
  Kwargs,      // a mapping of names to numbers (--model-kwargs depth=6 embed_dim=128)
  Amp,         // timm's boolean --amp, or a dtype name (--amp bf16)
};

struct ConfigKey {
  std::string dest;  // the key: the flag's name without "--", '-' as '_'
  ConfigType type;
  // The flag value that means "unset" (timm's None), written to args.yaml as null; none: every
  // value is written as what it is. Int, Float and the lists always write an empty value as null.
  std::optional<std::string> null_value = std::nullopt;
};

// The flag of a key: "--" + dest with '_' as '-' ("batch_size" -> "--batch-size").
std::string flag_name(const std::string& dest);

// What a config gives a command.
struct ConfigArgs {
  std::vector<std::string> argv;     // "--flag=value" / "--flag" for the known keys, in file order
  std::vector<std::string> ignored;  // the keys the command does not know, in file order
};

// Reads a config from YAML text; `name` (the file) is in every message. Errors (tessera::Error):
// malformed YAML (naming the line and column), a document that is not a mapping, and a value of
// the wrong type for its key. A null value, and an empty string (timm's '' for unset), leave the
// flag at its default.
ConfigArgs parse_config(const std::string& yaml, const std::string& name, const std::vector<ConfigKey>& keys);
// The same for a file; one that cannot be read is an error naming it.
ConfigArgs read_config(const std::string& path, const std::vector<ConfigKey>& keys);

// The config file named by -c FILE, --config FILE or --config=FILE in argv (the last one), or
// nullopt. A -c without a file name is an error.
std::optional<std::string> config_path(const std::vector<std::string>& argv);

// argv with its config's flags put before it, so the command line's own flags, parsed after them,
// win (argparse's set_defaults). The ignored keys are reported in `ignored` when given, else on
// stderr as "config FILE: ignoring keys timm uses that tessera does not: a, b, c".
std::vector<std::string> expand_config(const std::vector<std::string>& argv, const std::vector<ConfigKey>& keys,
                                       std::vector<std::string>* ignored = nullptr);

// The args.yaml value of a flag whose value is `value` ("" for an unset flag, "true"/"false" for a
// switch, as ArgParser::values() gives them).
train::SettingValue setting_value(const ConfigKey& key, const std::string& value);

}  // namespace tessera::cli
