#include "tessera/autograd/grad_mode.h"

namespace tessera::autograd {

namespace {
thread_local bool grad_mode = true;
}

bool grad_enabled() { return grad_mode; }
void set_grad_enabled(bool enabled) { grad_mode = enabled; }

NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

}  // namespace tessera::autograd
