// Image files as model input for the tools (`predict`, `attention-map`): decoded, converted to
// the model's channels and passed through the evaluation transform (resize by crop_pct, center
// crop, normalize) into one batch; and class names to label the predictions with.
#pragma once
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/pipeline.h"
#include "tools/cli/args.h"

namespace tessera::cli {

// True when `path` names a NumPy array (.npy) rather than an image file.
bool is_npy(const std::string& path);
// "a.jpg,b.png" -> {"a.jpg", "b.png"}
std::vector<std::string> split_list(const std::string& text);
// Decodes the files and stacks their eval-transformed tensors: float32 [B, C, R, R].
Tensor load_image_batch(const std::vector<std::string>& paths, const data::TransformOptions& eval_transform);
// Class names: one per line from --class-names FILE, else the classes of --dataset when it can be
// opened, else "0".."n-1". Exactly n names are returned (a file with another count is an error).
std::vector<std::string> class_names(const ArgParser& p, int64_t n, int64_t in_chans);

}  // namespace tessera::cli
