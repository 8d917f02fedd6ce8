// `tessera explain`: one self-contained HTML page (or --json) that shows how a model sees one
// image, block by block, as its paper defines its attention (tools/cli/explain.h). The model comes
// from --model with --weights, from a run folder (--checkpoint RUN/: its args.yaml gives the model
// and data flags, its best or newest checkpoint the weights), or untrained.
#include <cstdio>
#include <filesystem>

#include "tessera/core/atomic_file.h"
#include "tessera/models/registry.h"
#include "tessera/train/checkpoint.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/config_file.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/explain.h"
#include "tools/cli/image_input.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"

namespace tessera::cli {

namespace {

// The value of --checkpoint in the raw arguments ("--checkpoint DIR" or "--checkpoint=DIR"), read
// before parsing because the run's args.yaml supplies the other flags' defaults.
std::string checkpoint_arg(const Argv& args) {
  std::string dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--checkpoint" && i + 1 < args.size()) dir = args[i + 1];
    if (args[i].rfind("--checkpoint=", 0) == 0) dir = args[i].substr(13);
  }
  return dir;
}

// A run folder's weights: model_best (the best evaluated epoch), else the newest complete pair.
std::string run_weights(const std::string& dir) {
  TS_CHECK(std::filesystem::is_directory(dir), "explain: --checkpoint ", dir,
           ": expected a run folder of `tessera train` (with args.yaml and checkpoints)");
  const std::string best = (std::filesystem::path(dir) / "model_best.safetensors").string();
  if (std::filesystem::exists(best)) return best;
  const std::optional<std::string> newest = train::find_resume(dir);
  TS_CHECK(newest.has_value(), "explain: --checkpoint ", dir, ": the run folder holds no complete checkpoint");
  return *newest;
}

}  // namespace

int run_explain(const Argv& raw_args) {
  ArgParser p("explain",
              "Write one self-contained HTML page that shows how a model sees an image, block by block: its "
              "prediction, its module tree, the tokens through the network, each attention as its paper defines it, "
              "where the compute goes and the equations behind it.");
  add_model_options(p, classes_from_weights());
  add_data_options(p);
  p.option("--weights", "FILE", "weights (.safetensors, or a PyTorch .pth/.bin); none: the untrained model");
  p.option("--checkpoint", "RUN/",
           "a run folder of `tessera train`: its args.yaml gives the model and data flags (the command line wins), "
           "model_best.safetensors (else the newest checkpoint) the weights");
  p.option("--image", "FILE", "the input image (JPEG, PNG, BMP, ...)");
  p.option("--class-names", "FILE", "class names, one per line (none: --dataset's, else numbers)");
  p.option("--output", "FILE",
           "the file to write, replaced only once it is complete (default: explain.html, "
           "explain.json with --json)");
  p.flag("--json", "write the page's numbers (maps, norms, MACs; no pictures) as JSON instead of the page");
  add_precision_options(p);
  add_threads_option(p);

  const std::string run = checkpoint_arg(raw_args);
  const std::string run_best = run.empty() ? std::string() : run_weights(run);
  Argv args = raw_args;
  if (!run.empty()) {
    const std::string yaml = (std::filesystem::path(run) / "args.yaml").string();
    TS_CHECK(std::filesystem::exists(yaml), "explain: --checkpoint ", run, ": no args.yaml in the run folder");
    std::vector<ConfigKey> keys = model_config_keys();
    // Weights that record their model file build from it (wherever the run's --model file is now).
    if (!recorded_model_file(run_best).empty())
      std::erase_if(keys, [](const ConfigKey& k) { return k.dest == "model"; });
    for (ConfigKey& k : data_config_keys()) keys.push_back(std::move(k));
    args = read_config(yaml, keys).argv;  // the run's settings first: the command line, after them, wins
    args.insert(args.end(), raw_args.begin(), raw_args.end());
  }
  if (!p.parse(args)) return 0;
  apply_threads_option(p);
  const Precision precision = precision_options(p);
  apply_precision(precision);
  const std::string& image_path = p.require("--image");
  TS_CHECK(p.get("--weights").empty() || run.empty(), "explain: give --weights or --checkpoint, not both");
  const std::string weights = run.empty() ? p.get("--weights") : run_best;

  // Everything that can fail on the user's input fails before the page is written.
  std::shared_ptr<models::Model> model;
  if (weights.empty()) {
    model = create_model_from_flags(p, model_options(p));  // the file's classes (timm's 1000 for a name)
  } else {
    model = build_model_with_weights(p, weights);
  }
  TS_CHECK(explainable(*model), "explain: ", model_label(p, weights), " is a ", model->type_name(),
           ", not a model built from a model file's blocks (docs/models.md), which explain reads; `tessera inspect` "
           "shows its cost");
  data::TransformOptions t = eval_transform_options(p, model->in_chans);
  t.img_size = model->default_img_size;
  ExplainInput input;
  input.model_name = model_label(p, weights);
  input.weights = weights;
  input.image_path = image_path;
  input.image = load_image_batch({image_path}, t);
  input.mean = t.mean;
  input.std = t.std;
  input.class_names = class_names(p, model->num_classes, model->in_chans);
  input.amp = precision.amp;

  Explanation e = explain_model(*model, input);
  // The cost at the model's size and two larger ones, each a model of that size (CaiT's position
  // table is sized by it); MACs do not depend on the weights.
  e.compute.push_back(compute_of(e.summary, t.img_size));  // explain_model's pass at the model's size
  for (int64_t size : larger_sizes(t.img_size)) {
    models::ModelOptions o = model_options(p);
    o.num_classes = model->num_classes;
    o.in_chans = model->in_chans;
    o.img_size = size;
    auto sized = create_model_from_flags(p, o, weights);
    e.compute.push_back(compute_at_size(*sized, size));
  }

  const bool json = p.is_set("--json");
  const std::string output = !p.get("--output").empty() ? p.get("--output") : json ? "explain.json" : "explain.html";
  write_file_atomically(output, json ? explanation_json(e) : explanation_html(e));
  std::fprintf(stderr, "explain: %s on %s -> %s (%zu blocks%s)\n", input.model_name.c_str(), image_path.c_str(),
               output.c_str(), e.blocks.size(), weights.empty() ? ", untrained" : "");
  return 0;
}

}  // namespace tessera::cli
