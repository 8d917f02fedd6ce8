// Finite-difference gradient checking in float64, for ops and modules of the library and of its
// users (tests/gradcheck.h wraps it in Catch2 checks; examples/custom_attention checks a new
// attention with it).
//
// gradcheck(f, inputs) compares, for every input that requires grad, the analytic vector-Jacobian
// product from backward() against central differences (f(x+εe_i) − f(x−εe_i)) / 2ε, contracted
// with a fixed random upstream gradient, element by element. The inputs are leaves (the gradient
// is read from them); a non-contiguous or broadcast operand is a view f makes of one
// (`in[0].transpose(1, 2)`), so backward has to route the gradient through the view.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

struct GradcheckOptions {
  double eps = 1e-6;   // the finite-difference step
  double atol = 1e-5;  // |analytic − numeric| <= atol + rtol·|numeric| passes
  double rtol = 1e-4;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Returns a description of the first mismatch ("input 1 element 7: analytic 0.5 vs numeric 0.25"),
// or "" when every gradient matches. Every input that requires grad must be float64 and on the CPU.
std::string gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions options = {});

// Element i (logical row-major order) of a float64 tensor, read/written through its strides.
double& float64_element(const Tensor& t, int64_t i);

}  // namespace tessera
