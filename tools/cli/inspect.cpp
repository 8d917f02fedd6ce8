// `tessera inspect`: parameter count, FLOPs (multiply-accumulates, as the papers count them; see
// autograd/flop_counter.h) of one forward pass at the chosen resolution, and a per-module table; with
// --summary the whole module tree with each module's output shape, parameters and MACs
// (tools/cli/summary.h), to follow a forward pass layer by layer.
#include <cstdio>

#include "tessera/io/json.h"
#include "tessera/ops/ops.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_flags.h"
#include "tools/cli/summary.h"

namespace tessera::cli {

namespace {

void print_json(const std::string& name, int64_t img, const models::Model& model, int64_t macs) {
  json::Writer w;
  w.begin_object().key("model").value(name).key("img_size").value(img).key("params").value(model.num_parameters());
  w.key("flops").value(macs).key("modules").begin_array();
  for (const auto& [child_name, child] : model.named_children()) {
    w.begin_object().key("name").value(child_name).key("type").value(child->type_name());
    w.key("params").value(child->num_parameters()).end_object();
  }
  w.end_array().end_object();
  std::puts(w.str().c_str());
}

void print_table(const std::string& name, int64_t img, const models::Model& model, int64_t macs) {
  std::printf("%s (%s) at %lldx%lld, %lld classes\n", name.c_str(), model.type_name().c_str(),
              static_cast<long long>(img), static_cast<long long>(img), static_cast<long long>(model.num_classes));
  std::printf("params %.2f M, FLOPs %.3f G (multiply-accumulates per image, as the papers count)\n\n",
              model.num_parameters() / 1e6, macs / 1e9);
  std::printf("%-24s %-28s %14s\n", "module", "type", "params");
  for (const auto& [child_name, child] : model.named_children())
    std::printf("%-24s %-28s %14lld\n", child_name.c_str(), child->type_name().c_str(),
                static_cast<long long>(child->num_parameters()));
  std::printf("%-24s %-28s %14lld\n", "total", "", static_cast<long long>(model.num_parameters()));
}

}  // namespace

int run_inspect(const Argv& args) {
  ArgParser p("inspect", "Print a model's parameter count, its FLOPs for one image, and a per-module table.");
  add_model_options(p);
  p.flag("--summary", "the whole module tree: each module's output shape, parameters and MACs for one image");
  p.option("--depth", "N", "with --summary: list modules down to this depth (0: all)", "0");
  p.flag("--json", "print one JSON object (with --summary: the tree's rows as \"modules\")");
  add_threads_option(p);
  if (!p.parse(args)) return 0;
  apply_threads_option(p);
  const int64_t depth = p.get_int("--depth");
  if (depth < 0) throw UsageError("option --depth: expected 0 (all) or a positive depth, got " + std::to_string(depth));
  int64_t img = 0;
  auto model = build_model(p, &img);
  model->eval();
  const Tensor image = zeros({1, model->in_chans, img, img}, DType::Float32, model->device());
  const std::string& name = p.get("--model");
  if (p.is_set("--summary")) {
    const ModelSummary s = summarize(*model, image);
    if (p.is_set("--json")) {
      std::puts(summary_json(s, name).c_str());
    } else {
      std::printf("%s (%s) at %lldx%lld\n\n", name.c_str(), model->type_name().c_str(), static_cast<long long>(img),
                  static_cast<long long>(img));
      std::fputs(summary_text(s, static_cast<int>(depth)).c_str(), stdout);
    }
    return 0;
  }
  int64_t macs = 0;
  {
    NoGradGuard no_grad;
    FlopCounter counter;
    model->forward(image);
    macs = counter.macs();
  }
  if (p.is_set("--json")) print_json(name, img, *model, macs);
  else print_table(name, img, *model, macs);
  return 0;
}

}  // namespace tessera::cli
