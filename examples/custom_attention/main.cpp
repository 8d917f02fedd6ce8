// A `tessera` command line that also knows linear_vit_tiny and the token mixer linear_attention: the
// model is registered by name, the mixer as a word model files can use (linear_xca_hybrid.yaml),
// then every subcommand (train, validate, inspect, attention-map, explain, ...) is Tessera's own. One extra
// subcommand, check-gradients, proves the new attention's backward pass with finite differences.
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include <tessera/testing/gradcheck.h>
#include <tessera/ops/ops.h>
#include <tessera/tools/cli/commands.h>

#include "linear_vit.h"

namespace {

// Float64 central differences against autograd for the input tokens and the projection weights,
// on a contiguous and on a transposed (non-contiguous) input.
int check_gradients() {
  using namespace tessera;
  Generator gen(7);
  custom::LinearAttention attention(/*dim=*/8, /*num_heads=*/2);
  attention.to(DType::Float64);
  const Tensor x = randn({2, 5, 8}, DType::Float64, &gen).set_requires_grad(true);
  const Tensor x_t = randn({2, 8, 5}, DType::Float64, &gen).set_requires_grad(true);
  // The leaves are perturbed; a non-contiguous operand is a view made inside the function.
  const std::vector<std::tuple<std::string, GradcheckFn, std::vector<Tensor>>> cases = {
      {"tokens and weights",
       [&](const std::vector<Tensor>& in) { return attention.forward(in[0]); },
       {x, attention.qkv->weight, attention.proj->weight}},
      {"transposed tokens",
       [&](const std::vector<Tensor>& in) { return attention.forward(in[0].transpose(1, 2)); },
       {x_t}},
  };
  int failures = 0;
  for (const auto& [name, f, inputs] : cases) {
    const std::string mismatch = gradcheck(f, inputs);
    std::printf("%-20s %s\n", name.c_str(), mismatch.empty() ? "gradients match" : mismatch.c_str());
    failures += !mismatch.empty();
  }
  const Tensor around_zero = (rand({64}, DType::Float64, &gen) * 4.0 - 2.0).set_requires_grad(true);
  const std::string phi =
      gradcheck([](const std::vector<Tensor>& in) { return custom::elu_plus_one(in[0]); }, {around_zero});
  std::printf("%-20s %s\n", "elu(x) + 1", phi.empty() ? "gradients match" : phi.c_str());
  failures += !phi.empty();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  custom::register_linear_vit();
  custom::register_linear_attention_mixer();
  if (argc >= 2 && std::string(argv[1]) == "check-gradients") return check_gradients();
  return tessera::cli::main(argc, argv);
}
