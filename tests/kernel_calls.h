// Counts the calls of each kernel table on this thread while it exists (core/dispatch.h's
// KernelObserver): for tests that a change of layout or fusion makes the launches it promises.
#pragma once
#include <map>
#include <string>

#include "tessera/core/dispatch.h"

namespace tessera::testing {

class KernelCalls : public KernelObserver {
 public:
  KernelCalls() : previous_(KernelObserver::install(this)) {}
  ~KernelCalls() override { KernelObserver::install(previous_); }
  KernelCalls(const KernelCalls&) = delete;
  KernelCalls& operator=(const KernelCalls&) = delete;
  void kernel_begin(const char* op, Device) override { ++calls[op]; }
  void kernel_end(const char*, Device) noexcept override {}
  std::map<std::string, int> calls;  // by kernel table name

 private:
  KernelObserver* previous_;
};

}  // namespace tessera::testing
