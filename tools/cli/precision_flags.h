// --amp [DTYPE], --amp-dtype, --amp-activations, --tf32, --deterministic: the precision of a run
// (core/autocast.h: bfloat16 on cuda and the CPU, float16 on cuda), as rows of an option table
// (option_table.h). `--amp bf16` and timm's `--amp --amp-dtype bfloat16` mean the same; a bare --amp
// is float16, as in timm.
#pragma once
#include <optional>
#include <vector>

#include "tessera/core/autocast.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"
#include "tools/cli/option_table.h"

namespace tessera::cli {

// What the flags set, for the commands that run a model but do not train (train sets the members of
// the same names in TrainOptions). The defaults are the flags'.
struct Precision {
  std::optional<DType> amp;
  AmpActivations amp_activations = AmpActivations::Low;
  bool tf32 = false;
  bool deterministic = false;
};

// The rows, bound to the members above of Root: Precision or train::TrainOptions (the two this is
// instantiated for).
template <class Root>
const std::vector<OptionRow<Root>>& precision_option_table();

// Declares the flags, their defaults Precision's.
void add_precision_options(ArgParser& p);
std::vector<ConfigKey> precision_config_keys();
Precision precision_options(const ArgParser& p);
// Sets the process-wide switches (TF32, activation precision, deterministic algorithms) of commands
// that do not train.
void apply_precision(const Precision& precision);
// Autocast on `device` for the scope of the returned guard, as --amp asks (none without it): for
// the commands that run a model's forward pass themselves.
std::optional<AutocastGuard> autocast_scope(const Precision& precision, Device device);

}  // namespace tessera::cli
