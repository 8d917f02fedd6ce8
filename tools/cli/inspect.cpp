// `tessera inspect`: parameter count, FLOPs (multiply-accumulates, as the papers count them; see
// ops/flop_counter.h) of one forward pass at the chosen resolution, and a per-module table.
#include <cstdio>
#include <iostream>

#include "tessera/ops/ops.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_flags.h"

namespace tessera::cli {

int run_inspect(const Argv& args) {
  ArgParser p("inspect", "Print a model's parameter count, its FLOPs for one image, and a per-module table.");
  add_model_options(p);
  p.flag("--json", "print one JSON object: model, img_size, params, flops, modules");
  if (!p.parse(args)) return 0;
  int64_t img = 0;
  auto model = build_model(p, &img);
  model->eval();
  int64_t macs = 0;
  {
    NoGradGuard no_grad;
    FlopCounter counter;
    model->forward(zeros({1, p.get_int("--in-chans"), img, img}, DType::Float32, model->device()));
    macs = counter.macs();
  }
  const std::string& name = p.get("--model");
  if (p.is_set("--json")) {
    std::cout << "{\"model\": \"" << name << "\", \"img_size\": " << img << ", \"params\": " << model->num_parameters()
              << ", \"flops\": " << macs << ", \"modules\": [";
    const char* sep = "";
    for (const auto& [child_name, child] : model->named_children()) {
      std::cout << sep << "{\"name\": \"" << child_name << "\", \"type\": \"" << child->type_name()
                << "\", \"params\": " << child->num_parameters() << "}";
      sep = ", ";
    }
    std::cout << "]}\n";
    return 0;
  }
  std::printf("%s (%s) at %lldx%lld, %lld classes\n", name.c_str(), model->type_name().c_str(),
              static_cast<long long>(img), static_cast<long long>(img), static_cast<long long>(model->num_classes));
  std::printf("params %.2f M, FLOPs %.3f G (multiply-accumulates per image, as the papers count)\n\n",
              model->num_parameters() / 1e6, macs / 1e9);
  std::printf("%-24s %-28s %14s\n", "module", "type", "params");
  for (const auto& [child_name, child] : model->named_children())
    std::printf("%-24s %-28s %14lld\n", child_name.c_str(), child->type_name().c_str(),
                static_cast<long long>(child->num_parameters()));
  std::printf("%-24s %-28s %14lld\n", "total", "", static_cast<long long>(model->num_parameters()));
  return 0;
}

}  // namespace tessera::cli
