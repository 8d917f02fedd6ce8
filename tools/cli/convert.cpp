// `tessera convert`: a PyTorch checkpoint (the papers' official .pth files, timm's
// pytorch_model.bin; read without Python, nothing in it executed: io/torch_checkpoint.h) loaded into
// a model and written as safetensors under timm's parameter names, which every other command and
// timm itself read. The official names of each family are mapped to timm's on the way
// (models/official_keys.h); missing, unexpected or mis-shaped keys are reported as a load reports
// them, and nothing is written then.
#include <cstdio>

#include "tessera/io/safetensors.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_flags.h"

namespace tessera::cli {

int run_convert(const Argv& args) {
  ArgParser p("convert", "Write a PyTorch checkpoint (.pth, .bin) of a model as safetensors in timm's names.");
  add_model_options(p, classes_from_weights());
  p.option("--from", "FILE", "the checkpoint: a torch.save zip archive (PyTorch 1.6 or newer), or a .safetensors");
  p.option("--output", "FILE", "the .safetensors to write (an existing file is replaced only once all is read)");
  p.flag("--use-ema", "take the checkpoint's EMA weights ('model_ema' / 'state_dict_ema') instead of the model's");
  if (!p.parse(args)) return 0;
  const std::string& from = p.require("--from");
  const std::string& output = p.require("--output");
  TorchCheckpointOptions torch;
  torch.use_ema = p.is_set("--use-ema");
  const auto model = build_model_with_weights(p, from, 0, torch);
  const nn::NamedTensors state = model->state_dict();
  save_safetensors(output, state, {{"format", "pt"}, {"converted_from", from}, {"model", model_label(p, from)}});
  std::fprintf(stderr, "convert: %s -> %s (%zu tensors, %lld parameters, %s)\n", from.c_str(), output.c_str(),
               state.size(), static_cast<long long>(model->num_parameters()), p.get("--model").c_str());
  return 0;
}

}  // namespace tessera::cli
