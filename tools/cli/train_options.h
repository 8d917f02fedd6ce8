// `tessera train`'s own options as data (option_table.h): one row per flag gives its name (timm's
// spelling), metavar and help, and either the TrainOptions member it sets or the part of the command
// that reads it. The flags and their --help lines, the config keys (-c FILE and args.yaml), the
// TrainOptions the parsed flags give and the flag list of docs/cli.md (tests/test_train_config.cpp
// keeps it equal) are generated from the rows. A bound row's default is its member's default member
// initializer (train/trainer.h, or the data option struct the member lives in), so each default is
// written once, where the option lives.
//
// The flags `tessera train` shares with other commands (model, data and precision flags) are rows
// of the tables of model_flags.h, data_flags.h and precision_flags.h.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tessera/train/trainer.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"
#include "tools/cli/option_table.h"

namespace tessera::cli {

using TrainOption = OptionRow<train::TrainOptions>;

// The rows, in --help order.
const std::vector<TrainOption>& train_option_table();

// Declares every row's flag on `p`.
void add_train_options(ArgParser& p);
// Declares the rows of the training step that `tessera bench --mode train` times as well:
// --grad-checkpointing and --cuda-graph.
void add_train_step_options(ArgParser& p);
// Sets every bound row's member of `o` from the parsed flags.
void apply_train_options(const ArgParser& p, train::TrainOptions& o);

// The flags of `p` as the Markdown table of docs/cli.md: flag, args.yaml key and type, default,
// where the value goes (`consumer`), and help, one row per flag in --help order.
std::string flags_markdown(const ArgParser& p, const std::vector<ConfigKey>& keys,
                           const std::function<std::string(const std::string& dest)>& consumer);

}  // namespace tessera::cli
