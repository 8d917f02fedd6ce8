// Image files as model input; see tools/cli/image_input.h.
#include "tools/cli/image_input.h"

#include <fstream>
#include <sstream>

#include "tessera/data/decode.h"
#include "tessera/ops/ops.h"
#include "tools/cli/data_flags.h"

namespace tessera::cli {

bool is_npy(const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0; }

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Tensor load_image_batch(const std::vector<std::string>& paths, const data::TransformOptions& eval_transform) {
  TS_CHECK(!paths.empty(), "no image files given");
  const data::SampleTransform transform = data::create_transform(eval_transform);
  std::vector<Tensor> images;
  for (size_t i = 0; i < paths.size(); ++i) {
    data::SampleRng rng(0, 0, i);  // the evaluation transform draws nothing; the stream is required
    images.push_back(transform(data::decode_image(paths[i], eval_transform.in_chans), rng));
  }
  return stack(images, 0);
}

std::vector<std::string> class_names(const ArgParser& p, int64_t n, int64_t in_chans) {
  std::vector<std::string> names;
  if (!p.get("--class-names").empty()) {
    std::ifstream in(p.get("--class-names"));
    TS_CHECK(in.good(), "--class-names: cannot open ", p.get("--class-names"));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) names.push_back(printable(line));  // printed: a name file is untrusted text
    TS_CHECK(static_cast<int64_t>(names.size()) == n, "--class-names: ", p.get("--class-names"), " has ", names.size(),
             " names, the model has ", n, " classes");
    return names;
  }
  if (p.given("--dataset")) {
    names = open_dataset_from_flags(p, "validation", in_chans)->classes();
    for (std::string& name : names) name = printable(name);  // folder names, from wherever the data came
    if (static_cast<int64_t>(names.size()) == n) return names;
  }
  names.clear();
  for (int64_t i = 0; i < n; ++i) names.push_back(std::to_string(i));
  return names;
}

}  // namespace tessera::cli
