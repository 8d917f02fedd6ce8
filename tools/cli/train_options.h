// `tessera train`'s own options as data. One row per flag gives its name (timm's spelling), metavar
// and help, and either the TrainOptions member it sets or the part of the command that reads it.
// Everything else is generated from the rows: the flags and their --help lines, the config keys
// (-c FILE and args.yaml), with the type taken from the member's C++ type, the TrainOptions the
// parsed flags give, and the flag list of docs/cli.md (tests/test_train_config.cpp keeps it equal).
// A bound row's default is its member's default member initializer (train/trainer.h, or the data
// option struct the member lives in), so each default is written once, where the option lives.
//
// The flags `tessera train` shares with other commands (model, data and precision flags) are
// declared with those commands, in model_flags.h and data_flags.h, beside their config keys.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/train/trainer.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"

namespace tessera::cli {

struct TrainOption {
  std::string flag;     // "--mixup-switch-prob"; its config key is the dest name, "mixup_switch_prob"
  std::string alias;    // a short form ("-b"), or empty
  std::string metavar;  // empty for a switch
  std::string help;
  // Where the value goes: the TrainOptions member ("TrainOptions::mixup.switch_prob") or the code
  // of the command that consumes it ("run_train: the communicator"); shown in the docs' flag list.
  std::string consumer;
  ConfigType type = ConfigType::String;
  std::string default_value;  // as flag text; a bound row's is its member's default
  // The flag value args.yaml writes as null (timm's None); see ConfigKey::null_value.
  std::optional<std::string> null_value;
  // Stores the flag's text (as ArgParser holds it: "1" or "" for a switch) in its member, or
  // throws UsageError naming the flag; empty for a flag the command reads itself.
  std::function<void(train::TrainOptions&, const std::string& text)> set;

  ConfigKey config_key() const;
};

// The rows, in --help order.
const std::vector<TrainOption>& train_option_table();

// Declares every row's flag on `p`.
void add_train_options(ArgParser& p);
// Sets every bound row's member of `o` from the parsed flags.
void apply_train_options(const ArgParser& p, train::TrainOptions& o);

// The flags of `p` as the Markdown table of docs/cli.md: flag, args.yaml key and type, default,
// where the value goes (`consumer`), and help, one row per flag in --help order.
std::string flags_markdown(const ArgParser& p, const std::vector<ConfigKey>& keys,
                           const std::function<std::string(const std::string& dest)>& consumer);

}  // namespace tessera::cli
