// The flags that choose a dataset and its transforms, shared by `tessera train` and `tessera
// validate` (named as timm's train.py / validate.py name them), and by the commands that read
// images, as rows of an option table (option_table.h) bound to the loader's and the evaluation
// transform's options.
#pragma once
#include <memory>
#include <vector>

#include "tessera/data/dataset.h"
#include "tessera/data/loader.h"
#include "tessera/data/pipeline.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"
#include "tools/cli/option_table.h"

namespace tessera::cli {

// What the data flags set, for the commands that do not train (train sets the members of the same
// names in TrainOptions).
struct DataOptions {
  data::LoaderOptions loader;             // workers, strict
  data::TransformOptions eval_transform;  // interpolation, crop_pct, mean, std
};

// The rows, bound to the members above of Root: DataOptions or train::TrainOptions (the two this is
// instantiated for).
template <class Root>
const std::vector<OptionRow<Root>>& data_option_table();
// Sets the data flags' members of `o` (whose eval_transform.in_chans, which --mean and --std are per
// channel of, is set) and the process-wide --max-image-pixels; bad values are UsageErrors.
template <class Root>
void apply_data_options(const ArgParser& p, Root& o);

// Declares the flags, their defaults DataOptions'.
void add_data_options(ArgParser& p);
// The config keys (-c FILE, args.yaml) of those flags, with their types.
std::vector<ConfigKey> data_config_keys();
// The dataset to open: --dataset when given (on the command line or in a config); with only
// --data-dir, what that folder holds (data::detect_dataset, timm's behaviour: a folder of class
// subfolders is an ImageFolder); with neither, --dataset's default, Fashion-MNIST. `reason` is
// empty unless the folder decided.
data::DetectedDataset resolve_dataset(const ArgParser& p);
// The model's input channels: --in-chans when given, else 1 for the grayscale IDX datasets
// (MNIST, Fashion-MNIST) and 3 otherwise.
int64_t resolve_in_chans(const ArgParser& p);
// The evaluation transform's options (mean/std, interpolation, crop_pct) the flags give. Every
// command that decodes images calls it (or apply_data_options), so it also applies
// --max-image-pixels (process-wide).
data::TransformOptions eval_transform_options(const ArgParser& p, int64_t in_chans);
// Opens resolve_dataset(p) at --data-dir, split `split`, for a model with in_chans channels.
std::shared_ptr<data::Dataset> open_dataset_from_flags(const ArgParser& p, const std::string& split, int64_t in_chans);

}  // namespace tessera::cli
