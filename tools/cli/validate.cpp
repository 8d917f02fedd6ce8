// `tessera validate`: loss, top-1 and top-5 of a weights file on a dataset split (timm's
// validate.py), with the evaluation transform (resize by crop_pct, center crop, normalize).
#include <cstdio>
#include <filesystem>

#include "tessera/core/parallel.h"
#include "tessera/io/json.h"
#include "tessera/core/autocast.h"
#include "tessera/data/class_map.h"
#include "tessera/data/loader.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/data_flags.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/precision_flags.h"
#include "tessera/train/trainer.h"

namespace tessera::cli {

int run_validate(const Argv& args) {
  ArgParser p("validate", "Evaluate a weights file on a dataset: loss, top-1 and top-5 accuracy.");
  add_model_options(p, classes_from_weights());
  add_data_options(p);
  p.option("--checkpoint", "FILE",
           "weights to evaluate (.safetensors, e.g. a run's model_best.safetensors, or a PyTorch .pth/.bin)");
  p.option("--split", "NAME", "dataset split", "validation");
  p.option("--batch-size", "B", "images per batch", "256", "-b");
  add_threads_option(p);
  p.flag("--json", "print one JSON object: model, checkpoint, samples, loss, top1, top5");
  add_precision_options(p);
  if (!p.parse(args)) return 0;
  apply_threads_option(p);
  const std::string& checkpoint = p.require("--checkpoint");
  auto model = build_model_with_weights(p, checkpoint);  // classes and channels from the weights
  const int64_t in_chans = model->in_chans;
  auto dataset = open_dataset_from_flags(p, p.get("--split"), in_chans);
  // A checkpoint in a run folder: the dataset must number its classes as the run did (data/class_map.h).
  const std::filesystem::path class_map = std::filesystem::path(checkpoint).parent_path() / data::kClassMapFile;
  if (std::filesystem::exists(class_map))
    data::check_class_map(class_map.string(), dataset->classes(), "validate: the dataset");
  TS_CHECK(static_cast<int64_t>(dataset->classes().size()) == model->num_classes, "validate: ", checkpoint, " has ",
           model->num_classes, " classes, the dataset ", dataset->classes().size());
  DataOptions d;
  d.eval_transform.in_chans = in_chans;
  apply_data_options(p, d);
  d.eval_transform.img_size = model->default_img_size;
  d.loader.batch_size = p.get_int("--batch-size");
  d.loader.shuffle = false;
  d.loader.feeds_gpu = !model->device().is_cpu();
  data::DataLoader loader(dataset, data::create_transform(d.eval_transform), d.loader);
  const Precision precision = precision_options(p);
  apply_precision(precision);
  const train::EvalResult r = train::evaluate(*model, loader, 0, precision.amp);
  if (p.is_set("--json")) {
    json::Writer w;
    w.begin_object().key("model").value(model_label(p, checkpoint)).key("checkpoint").value(checkpoint);
    w.key("samples").value(r.samples).key("loss").value(r.loss).key("top1").value(r.top1).key("top5").value(r.top5);
    std::puts(w.end_object().str().c_str());
  } else {
    std::printf("%s on %lld images: loss %.4f, top-1 %.2f%%, top-5 %.2f%%\n", checkpoint.c_str(),
                static_cast<long long>(r.samples), r.loss, r.top1, r.top5);
  }
  return 0;
}

}  // namespace tessera::cli
