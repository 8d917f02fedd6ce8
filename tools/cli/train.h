// `tessera train`'s flags as the rest of the tool and the tests see them: the parser (with
// -c/--config FILE read first), the config keys that describe each flag's type, and the
// TrainOptions and args.yaml settings the parsed flags give. The command itself is run_train
// (tools/cli/commands.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/train/trainer.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/config_file.h"

namespace tessera::cli {

// The parser of `tessera train`, every flag declared.
ArgParser train_parser();
// Every flag of train_parser() but --config, by dest name with its type: what a config may set
// and how args.yaml writes it.
const std::vector<ConfigKey>& train_config_keys();
// Parses `args` into `p` (a train_parser()), a config's values first (config_file.h); `ignored`
// receives the config's unknown keys (null: they are printed on stderr). false: --help was shown.
bool parse_train_args(ArgParser& p, const Argv& args, std::vector<std::string>* ignored = nullptr);
// The flags of `tessera train` as the Markdown table docs/cli.md shows (train_options.h).
std::string train_flags_markdown();
// The training options the flags give (everything but the communicator and the run's settings).
train::TrainOptions train_options(const ArgParser& p, int64_t in_chans, const std::string& model_label = "");
// args.yaml: every flag's value, typed by train_config_keys(), with the channels and classes the
// run resolved (not the flags' placeholders), and timm's amp_dtype for an --amp given a dtype.
train::Settings train_settings(const ArgParser& p, int64_t in_chans, int64_t num_classes);

}  // namespace tessera::cli
