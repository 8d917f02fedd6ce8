#include "tessera/core/device.h"

#include "tessera/core/error.h"

namespace tessera {

std::string Device::str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      int idx = std::stoi(s.substr(5), &used);
      if (used == s.size() - 5 && idx >= 0) return Device::cuda(idx);
    } catch (const std::exception&) {}
  }
  throw Error("parse_device: unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

}  // namespace tessera
