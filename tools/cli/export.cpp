// `tessera export`: a model (with its weights, or untrained) written as ONNX for the runtimes
// people deploy with — opset 17, float32, eval mode, traced from the model's own forward pass
// (io/onnx_export.h). docs/interop.md shows how to run the file in ONNX Runtime.
#include <cstdio>

#include "tessera/io/onnx_export.h"
#include "tessera/models/registry.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_flags.h"

namespace tessera::cli {

int run_export(const Argv& args) {
  ArgParser p("export", "Write a model as ONNX (opset 17, float32, eval mode) for ONNX Runtime, TensorRT, OpenVINO.");
  add_model_options(p, classes_from_weights());
  p.option("--weights", "FILE", "its weights: safetensors or a PyTorch .pth/.bin (none: untrained, with a warning)");
  p.option("--output", "FILE", "the .onnx file to write (an existing file is replaced only once all is written)");
  p.flag("--dynamic-batch", "the batch dim as the symbol 'batch' (otherwise batch 1)");
  if (!p.parse(args)) return 0;
  const std::string& output = p.require("--output");
  const std::string weights = p.get("--weights");
  if (weights.empty()) std::fprintf(stderr, "export: no --weights: writing the untrained model's random weights\n");
  std::shared_ptr<models::Model> model;
  if (weights.empty()) {  // the model file's classes (a named variant's: timm's 1000) unless told otherwise
    model = create_model_from_flags(p, model_options(p));
  } else {
    model = build_model_with_weights(p, weights, 0);
  }
  const int64_t img = p.get_int("--img-size") > 0 ? p.get_int("--img-size") : model->default_img_size;
  OnnxExportOptions options;
  options.in_chans = model->in_chans;
  options.img_size = img;
  options.dynamic_batch = p.is_set("--dynamic-batch");
  export_onnx(*model, output, options);
  std::fprintf(stderr, "export: %s -> %s (opset 17, input [%s, %lld, %lld, %lld])\n", model_label(p, weights).c_str(),
               output.c_str(), options.dynamic_batch ? "batch" : "1", static_cast<long long>(model->in_chans),
               static_cast<long long>(img), static_cast<long long>(img));
  return 0;
}

}  // namespace tessera::cli
