// The autograd engine: accumulation, no_grad, detach, retain_graph, the in-place and freed-graph
// errors, deep graphs, and that nothing leaks after backward.
#include "tessera/autograd/function.h"
#include "tessera/autograd/hooks.h"
#include "tessera/autograd/node.h"
#include "tessera/core/levers.h"
#include "gradcheck.h"
#include "kernel_calls.h"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("gradients accumulate into leaves across backward calls", "[autograd]") {
  Tensor x = from_vector(std::vector<double>{1, 2}, {2}).set_requires_grad();
  (x * x).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 4});
  (x * 3.0).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 7});
  x.set_grad(Tensor());
  (x * 3.0).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
}

TEST_CASE("backward with an explicit upstream gradient", "[autograd]") {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}).set_requires_grad();
  Tensor y = x * 2.0;
  y.backward(from_vector(std::vector<double>{1, 10, 100}, {3}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 20, 200});
  CHECK_THROWS_WITH((x * 2.0).backward(), Catch::Contains("one element"));
  CHECK_THROWS_WITH((x * 2.0).backward(ones({2}, DType::Float64)), Catch::Contains("shape"));
  CHECK_THROWS_WITH(ones({1}).backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("no_grad records nothing and detach cuts history", "[autograd]") {
  Tensor x = ones({2}).set_requires_grad();
  {
    NoGradGuard guard;
    Tensor y = x * 2.0;
    CHECK(!y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  Tensor tracked = x * 2.0;
  CHECK(tracked.requires_grad());
  CHECK(tracked.grad_fn()->name() == "MulBackward");
  Tensor d = tracked.detach();
  CHECK(!d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.raw_data() == tracked.raw_data());
  (d * x).sum().backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("only leaves can be marked, only floating tensors can require grad", "[autograd][errors]") {
  Tensor x = ones({2}).set_requires_grad();
  CHECK_THROWS_WITH((x * 2.0).set_requires_grad(), Catch::Contains("leaf"));
  CHECK_THROWS_WITH(arange(3).set_requires_grad(), Catch::Contains("int64"));
}

TEST_CASE("modifying a saved tensor in place makes backward fail clearly", "[autograd][errors]") {
  Tensor w = ones({3}).set_requires_grad();
  Tensor x = full({3}, 2.0);  // saved by mul for w's gradient
  Tensor y = (w * x).sum();
  x.add_(ones({3}));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified by an in-place operation") &&
                                      Catch::Contains("version 1") && Catch::Contains("expected version 0"));
}

TEST_CASE("a freed graph cannot be backpropagated twice; retain_graph keeps it", "[autograd][errors]") {
  Tensor x = ones({2}).set_requires_grad();
  Tensor y = exp(x).sum();
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("second time") && Catch::Contains("retain_graph"));

  Tensor z = exp(x).sum();
  x.set_grad(Tensor());
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();
  CHECK(x.grad().to_vector<float>()[0] == Approx(2 * std::exp(1.0)));
}

TEST_CASE("an input that receives no gradient does not stall the others", "[autograd]") {
  // y depends on x through two paths; one of them (the comparison) carries no gradient.
  Tensor x = from_vector(std::vector<double>{-1, 2}, {2}).set_requires_grad();
  Tensor mask = gt(x, scalar_like(0.0, x));
  Tensor y = where(mask, x * 3.0, x * 0.0).sum();
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 3});
}

TEST_CASE("post-accumulate hooks see each pass's complete gradient, once per pass that reaches the leaf",
          "[autograd]") {
  Tensor x = from_vector(std::vector<double>{1, 2}, {2}).set_requires_grad();
  Tensor unused = from_vector(std::vector<double>{5}, {1}).set_requires_grad();
  std::vector<std::vector<double>> seen;
  int unused_calls = 0;
  const int64_t h = autograd::add_post_accumulate_grad_hook(x, [&](const Tensor& leaf) {
    CHECK(!autograd::grad_enabled());
    seen.push_back(leaf.grad().to_vector<double>());
  });
  autograd::add_post_accumulate_grad_hook(unused, [&](const Tensor&) { ++unused_calls; });
  // x reaches the loss along two paths: the hook runs once, after both contributions are summed.
  ((x * x).sum() + (x * 3.0).sum()).backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{5, 7});
  (x * 2.0).sum().backward();  // a second pass: the hook sees the accumulated gradient
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{7, 9});
  CHECK(unused_calls == 0);
  autograd::remove_post_accumulate_grad_hook(x, h);
  (x * 2.0).sum().backward();
  CHECK(seen.size() == 2);
  CHECK_THROWS_WITH(autograd::add_post_accumulate_grad_hook(x * 2.0, [](const Tensor&) {}),
                    Catch::Contains("expected a leaf that requires grad"));
}

TEST_CASE("a 10,000-op-deep graph backpropagates and frees without recursion", "[autograd]") {
  const int64_t nodes_before = autograd::Node::live_count();
  {
    Tensor x = from_vector(std::vector<double>{1.0}, {1}).set_requires_grad();
    Tensor y = x;
    for (int i = 0; i < 10000; ++i) y = y * 1.0001;
    y.sum().backward();
    CHECK(x.grad().item() == Approx(std::pow(1.0001, 10000)));
  }
  {
    // Built and dropped without backward: teardown of the chain must be iterative too.
    Tensor x = ones({1}).set_requires_grad();
    Tensor y = x;
    for (int i = 0; i < 100000; ++i) y = y + 1.0;
  }
  CHECK(autograd::Node::live_count() == nodes_before);
}

TEST_CASE("nothing is leaked after backward", "[autograd]") {
  const int64_t nodes_before = autograd::Node::live_count();
  const int64_t storages_before = Storage::live_count();
  {
    Tensor w = randn({4, 4}, DType::Float64).set_requires_grad();
    Tensor x = randn({4}, DType::Float64);
    Tensor h = tanh(w * x) + exp(w.t());
    Tensor loss = (h * h).mean();
    loss.backward();
    CHECK(autograd::Node::live_count() > nodes_before);  // w's AccumulateGrad stays while w lives
  }
  CHECK(autograd::Node::live_count() == nodes_before);
  CHECK(Storage::live_count() == storages_before);
}

// The engine's routing of a view's gradient into its base (autograd, not one op's math).
TEST_CASE("gradients flow through views of leaves into the leaf", "[autograd]") {
  Tensor x = leaf({2, 3});
  CHECK_GRADS(
      [](const std::vector<Tensor>& v) {
        Tensor a = v[0].t();           // non-contiguous view
        Tensor b = v[0].select(0, 1);  // another view of the same leaf
        return a * b.unsqueeze(1) + a;
      },
      {x});
}

// An op with several outputs (cast_all) has one node; the engine hands it every output's gradient
// at once, after all of their consumers have run.
TEST_CASE("a node with several outputs receives each output's gradient, summed over its uses", "[autograd]") {
  Tensor a = from_vector(std::vector<double>{1, 2}, {2}).set_requires_grad();
  Tensor b = from_vector(std::vector<double>{3, 4, 5}, {3}).set_requires_grad();
  const std::vector<Tensor> out = cast_all({a, b}, DType::Float32);
  REQUIRE(out[0].grad_fn() != nullptr);
  CHECK(out[0].grad_fn() == out[1].grad_fn());
  CHECK(out[0].grad_fn()->num_outputs() == 2);
  // out[0] used twice, out[1] once: a's gradient sums both uses, b's is its own.
  ((out[0] * 2.0).sum() + (out[0] * out[0]).sum() + (out[1] * 3.0).sum()).backward();
  CHECK(a.grad().dtype() == DType::Float64);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{4, 6});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{3, 3, 3});
}

TEST_CASE("outputs of a multi-output node that get no gradient leave their inputs without one", "[autograd]") {
  Tensor a = ones({2}, DType::Float64).set_requires_grad(), b = ones({3}, DType::Float64).set_requires_grad();
  std::vector<Tensor> out = cast_all({a, b}, DType::Float32);
  (out[1] * 5.0).sum().backward();  // out[0] is never used
  CHECK(!a.grad().defined());
  CHECK(b.grad().to_vector<double>() == std::vector<double>{5, 5, 5});
  // Backward may start at any output of the node, not only the first.
  out = cast_all({a, b}, DType::Float32);
  out[1].backward(from_vector(std::vector<float>{1, 2, 3}, {3}));
  CHECK(b.grad().to_vector<double>() == std::vector<double>{6, 7, 8});
}

TEST_CASE("a multi-output node's graph is freed after backward", "[autograd]") {
  const int64_t nodes_before = autograd::Node::live_count();
  {
    Tensor a = ones({2}).set_requires_grad(), b = ones({2}).set_requires_grad();
    const std::vector<Tensor> out = cast_all({a, b}, DType::Float64);
    (out[0] + out[1]).sum().backward();
    CHECK_THROWS_WITH((out[0] + out[1]).sum().backward(), Catch::Contains("second time"));
  }
  CHECK(autograd::Node::live_count() == nodes_before);
}

TEST_CASE("sums of gradients go into a buffer only the engine holds, never into one shared", "[autograd]") {
  Generator gen(21);
  const Tensor x0 = randn({4, 6}, DType::Float64, &gen), upstream = randn({4, 6}, DType::Float64, &gen);
  const std::vector<double> upstream_before = upstream.to_vector<double>();
  // x reaches the output by four paths: fresh gradients (x * 3, exp), the same gradient handed to
  // both inputs of an add (a + a), a gradient that is a view of another (a transposed path) and
  // the caller's own upstream tensor (y's identity path).
  const auto grad_of = [&] {
    Tensor x = x0.clone().set_requires_grad(true);
    Tensor a = x * 2.0;
    Tensor y = x * 3.0 + exp(x) + (a + a) + x.t().contiguous().t() + x;
    y.backward(upstream);
    return x.grad().to_vector<double>();
  };
  std::vector<double> in_place, fresh;
  {
    ScopedLever on(&Levers::accumulate_in_place, true);
    in_place = grad_of();
  }
  {
    ScopedLever off(&Levers::accumulate_in_place, false);
    fresh = grad_of();
  }
  CHECK(in_place == fresh);  // the same additions in the same order: the same bits
  CHECK(upstream.to_vector<double>() == upstream_before);
  const std::vector<double> g = upstream.to_vector<double>(), x = x0.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) CHECK(in_place[i] == Approx(g[i] * (3.0 + std::exp(x[i]) + 4.0 + 1.0 + 1.0)));
}

TEST_CASE("a gradient summed into a slice of a larger buffer comes out dense", "[autograd]") {
  // u's gradient arrives first as the slice of a cat's gradient (its only owner by then), then as a
  // dense tensor. Summed into the slice in place, every node after u would get a strided gradient
  // (and copy it: 36 copies a step in XCiT-S12); summed into a new tensor, it is dense.
  Tensor x = randn({2, 3}, DType::Float64).set_requires_grad(true);
  bool dense = false;
  Tensor u = x.detach();
  autograd::record("Probe", {x}, u, [&dense](const Tensor& g, const GradMask&) {
    dense = g.is_contiguous();
    return std::vector<Tensor>{g};
  });
  // Made in this order, the cat's node runs first in backward (later nodes run first).
  const Tensor direct = (u * 3.0).sum();
  const Tensor joined = (cat({u, zeros({2, 4}, DType::Float64)}, 1) * 2.0).sum();
  (direct + joined).backward();
  CHECK(dense);
  CHECK(x.grad().to_vector<double>() == std::vector<double>(6, 5.0));
}

namespace {

// The gradient of x through a residual stream whose other parts arrive at its buffer later: a layer
// norm (adds within its kernel), a slice and an unbind of which one piece is used (add into the
// elements their views took). Each residual's dense part is made last so that it runs first in
// backward and waits in the buffer.
Tensor sink_graph(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor a = x * 2.0;
  const Tensor normed = layer_norm(a, w, b, 1e-5) * 3.0;
  const Tensor r1 = a * 1.5 + normed;
  const Tensor sliced = r1.narrow(1, 2, 3) * 4.0;
  const Tensor v = unbind(r1, 1)[4] * 5.0;
  const Tensor r2 = r1 * 0.5;
  return r2.sum() + sliced.sum() + v.sum();
}

}  // namespace

TEST_CASE("a layer norm, a slice and a split add their input gradients into the engine's buffer (gradient sinks)",
          "[autograd]") {
  Generator gen(5);
  const Tensor x0 = randn({4, 6}, DType::Float64, &gen), w = randn({6}, DType::Float64, &gen),
               b = randn({6}, DType::Float64, &gen);
  const auto run = [&](bool sinks) {
    ScopedLever lever(&Levers::gradient_sinks, sinks);
    Tensor x = x0.clone().set_requires_grad(true);
    const Tensor loss = sink_graph(x, w, b);
    KernelCalls calls;
    loss.backward();
    return std::pair{x.grad().to_vector<double>(), calls.calls};
  };
  const auto [with, with_calls] = run(true);
  const auto [without, without_calls] = run(false);
  REQUIRE(with.size() == without.size());
  for (size_t i = 0; i < with.size(); ++i) CHECK(with[i] == Approx(without[i]).epsilon(1e-12));
  // Without sinks the slice and the unbind each write a full-size gradient (embed, cat) that the
  // engine then adds; with them, the three sums happen inside the producers.
  const auto count = [](const std::map<std::string, int>& calls, const char* kernel) {
    const auto it = calls.find(kernel);
    return it == calls.end() ? 0 : it->second;
  };
  CHECK(count(without_calls, "embed") == 1);
  CHECK(count(with_calls, "embed") == 0);
  CHECK(count(without_calls, "cat") == 1);
  CHECK(count(with_calls, "cat") == 0);
  CHECK(count(without_calls, "binary") - count(with_calls, "binary") == 1);  // layer norm's sum
  // Against finite differences, through the sinks.
  ScopedLever on(&Levers::gradient_sinks, true);
  CHECK_GRADS([&](const std::vector<Tensor>& in) { return sink_graph(in[0], w, b); },
              {x0.clone().set_requires_grad(true)});
}
