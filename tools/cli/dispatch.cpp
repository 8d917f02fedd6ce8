// The `tessera` command line: git-style subcommands, dispatched by name. `tessera help` lists them;
// `tessera COMMAND --help` explains each flag. tools/cli/main.cpp is the program; a user's program
// that registers models of its own calls the same main() (examples/custom_attention).
#include <cstdio>
#include <string>

#include "tessera/train/distributed/communicator.h"
#include "tessera/version.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

namespace {

struct Command {
  const char* name;
  int (*run)(const Argv&);
  const char* summary;
};

const Command kCommands[] = {
    {"models", run_models, "list the registered model names"},
    {"ops", run_ops, "list every op kernel and the devices (cpu, cuda) that implement it"},
    {"inspect", run_inspect, "parameter count, FLOPs and a per-module table of a model"},
    {"predict", run_predict, "run a model on a .npy batch of images and write the logits as .npy"},
    {"bench", run_bench, "measure images/s and peak memory of inference or a training step"},
    {"bench-data", run_bench_data, "measure the input pipeline on an image folder: decode, transforms, loader"},
    {"train", run_train, "train a model on an image dataset (timm's train.py flags)"},
    {"validate", run_validate, "loss, top-1 and top-5 of a weights file on a dataset"},
    {"attention-map", run_attention_map, "PNG maps of each head's class attention over an image"},
    {"explain", run_explain,
     "one offline HTML page: how a model sees an image, block by block, as its paper defines it"},
    {"convert", run_convert, "a PyTorch .pth/.bin checkpoint as safetensors in timm's names, read safely"},
    {"export", run_export, "a model as ONNX (opset 17) for ONNX Runtime, TensorRT, OpenVINO"},
};

int usage(FILE* out, int code) {
  std::fputs("usage: tessera COMMAND [options]   (tessera COMMAND --help for its options)\n\ncommands:\n", out);
  for (const Command& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
  std::fputs("\n  --version      the version and how this build was configured\n", out);
  return code;
}

// "tessera train: <message>", without a second "train: " when the message starts with the
// command's name already (checks written to be read on their own, outside the tool, name it).
int report(const char* command, const std::exception& e, int code) {
  std::string message = printable(e.what());  // also what yaml-cpp or the standard library threw
  const std::string own = std::string(command) + ": ";
  if (message.rfind(own, 0) == 0) message.erase(0, own.size());
  std::fprintf(stderr, "tessera %s: %s\n", command, message.c_str());
  return code;
}

}  // namespace

std::string version_text() {
  std::string text = "tessera " TESSERA_VERSION_STRING "\n";
  text += "built for: -march=" TESSERA_BUILD_ARCH "\n";
  text += "cpu: ";
  // What this machine could use that a portable build leaves out (docs/install.md).
  __builtin_cpu_init();
  text += __builtin_cpu_supports("avx512f") ? "avx512f " : "";
  text += __builtin_cpu_supports("avx2") ? "avx2 " : "";
  text += __builtin_cpu_supports("fma") ? "fma" : "";
  text += "\nbackends: cpu";
#if defined(TESSERA_CUDA)
  text += ", cuda";
#elif defined(TESSERA_CUDA_EMU)
  text += ", cuda (SIMT emulator)";
#endif
  // The communicators this build registered (train/distributed/backends/): mpi, nccl.
  for (const std::string& backend : train::dist::communicator_backends()) text += ", " + backend;
  return text + "\n";
}

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr, 2);
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") return usage(stdout, 0);
  if (name == "--version" || name == "version") {
    std::fputs(version_text().c_str(), stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(Argv(argv + 2, argv + argc));
    } catch (const UsageError& e) {  // the command line is wrong: 2, as argparse
      return report(c.name, e, 2);
    } catch (const std::exception& e) { return report(c.name, e, 1); }
  }
  std::fprintf(stderr, "tessera: unknown command '%s'\n", printable(name).c_str());
  return usage(stderr, 2);
}

}  // namespace tessera::cli
