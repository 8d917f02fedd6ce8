// The flags that choose a dataset and its transforms, shared by `tessera train` and `tessera
// validate` (named as timm's train.py / validate.py name them).
#pragma once
#include <memory>

#include "tessera/data/dataset.h"
#include "tessera/data/pipeline.h"
#include "tools/cli/args.h"
#include "tools/cli/config_file.h"

namespace tessera::cli {

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
// Evaluation-side transform options (mean/std, interpolation, crop_pct) from the flags. Every
// command that decodes images calls it, so it also applies --max-image-pixels (process-wide).
data::TransformOptions eval_transform_options(const ArgParser& p, int64_t in_chans);
// Opens resolve_dataset(p) at --data-dir, split `split`, for a model with in_chans channels.
std::shared_ptr<data::Dataset> open_dataset_from_flags(const ArgParser& p, const std::string& split, int64_t in_chans);

}  // namespace tessera::cli
