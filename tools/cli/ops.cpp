// `tessera ops`: every kernel table (the device-dispatched unit of an op), the public ops it
// serves, and the devices that implement it — from the one list in ops/kernels/registry.h.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/core/backend.h"
#include "tessera/io/json.h"
#include "tessera/ops/kernels/registry.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace tessera::cli {

namespace {

struct DeviceColumn {
  const char* name;
  DeviceType type;
};
constexpr DeviceColumn kColumns[] = {{"cpu", DeviceType::CPU}, {"cuda", DeviceType::CUDA}};

std::vector<std::string> devices_of(const KernelTableInfo& k) {
  std::vector<std::string> out;
  for (const DeviceColumn& c : kColumns)
    if (k.has(c.type)) out.emplace_back(c.name);
  return out;
}

// ["a", "b"] as JSON, or "a b" as text.
std::string join(const std::vector<std::string>& items, bool as_json) {
  std::string out = as_json ? "[" : "";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.append(as_json ? ", " : " ");
    if (as_json) json::append_quoted(out, items[i]);
    else out.append(items[i]);
  }
  if (as_json) out.append("]");
  return out;
}

void print_json(DeviceBackend* cuda) {
  std::string out = "{\"devices\": {\"cpu\": \"built in\", \"cuda\": ";
  if (cuda) json::append_quoted(out, cuda->description());
  else out.append("null");
  out.append("}, \"kernels\": [");
  const auto& tables = kernel_tables();
  for (size_t i = 0; i < tables.size(); ++i) {
    const KernelTableInfo& k = tables[i];
    out.append(i ? ", {\"name\": " : "{\"name\": ");
    json::append_quoted(out, k.name);
    out.append(", \"family\": ");
    json::append_quoted(out, k.family);
    out.append(", \"ops\": ");
    json::append_quoted(out, k.serves);
    out.append(", \"devices\": ");
    out.append(join(devices_of(k), true));
    out.append("}");
  }
  out.append("]}");
  std::puts(out.c_str());
}

}  // namespace

int run_ops(const Argv& args) {
  ArgParser p("ops", "List every op kernel and the devices that implement it.");
  p.flag("--json", "print one JSON object: the devices of this build and every kernel with its devices");
  if (!p.parse(args)) return 0;
  DeviceBackend* cuda = find_backend(DeviceType::CUDA);
  if (p.is_set("--json")) {
    print_json(cuda);
    return 0;
  }
  std::printf("cuda backend: %s\n\n", cuda ? cuda->description().c_str()
                                           : "not built (configure with -DTESSERA_CUDA=ON or -DTESSERA_CUDA_EMU=ON)");
  int name_width = 6;  // the longest kernel name makes the first column
  for (const KernelTableInfo& k : kernel_tables()) name_width = std::max(name_width, static_cast<int>(std::strlen(k.name)));
  std::printf("%-*s %-14s %-10s %s\n", name_width, "kernel", "family", "devices", "ops");
  int missing_on_cuda = 0;
  for (const KernelTableInfo& k : kernel_tables()) {
    std::printf("%-*s %-14s %-10s %s\n", name_width, k.name, k.family, join(devices_of(k), false).c_str(), k.serves);
    missing_on_cuda += cuda && !k.has(DeviceType::CUDA);
  }
  if (cuda) std::printf("\n%d kernel%s missing on cuda\n", missing_on_cuda, missing_on_cuda == 1 ? "" : "s");
  return 0;
}

}  // namespace tessera::cli
