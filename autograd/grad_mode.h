// Grad mode: a thread-local switch. While it is off (inside a NoGradGuard) ops record no graph;
// inference, optimizer steps and the backward pass itself run that way.
#pragma once

namespace tessera::autograd {

bool grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tessera::autograd

namespace tessera {
using autograd::NoGradGuard;
}
