// Observing module boundaries during forward (nn/module.h ForwardScope / ObserveForward), the
// mechanism behind `tessera inspect --summary`.
#include <catch2/catch.hpp>

#include "tessera/models/coat.h"
#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"

using namespace tessera;

namespace {

// Every event as "enter Type" / "exit Type [shape] ..." (or "exit Type threw").
struct Recorder : nn::ForwardObserver {
  std::vector<std::string> events;
  void enter(const nn::Module& m) override { events.push_back("enter " + m.type_name()); }
  void exit(const nn::Module& m, const std::vector<Tensor>& outputs) noexcept override {
    std::string e = "exit " + m.type_name();
    if (outputs.empty()) e += " threw";
    for (const Tensor& t : outputs) e += " " + shape_str(t.shape());
    events.push_back(e);
  }
};

// A module whose forward fails after calling a child.
struct Failing : nn::Module {
  std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 2));
  Tensor forward(const Tensor& x) override {
    nn::ForwardScope scope(*this);
    fc->forward(x);
    throw Error("Failing: on purpose");
  }
  std::string type_name() const override { return "Failing"; }
};

}  // namespace

TEST_CASE("ForwardScope reports nested calls with their outputs, in order", "[module_trace]") {
  nn::Sequential seq;
  seq.push_back(std::make_shared<nn::Linear>(4, 8));
  seq.push_back(std::make_shared<nn::GELU>());
  seq.push_back(std::make_shared<nn::Linear>(8, 3));
  const Tensor x = randn({2, 4});
  Recorder rec;
  {
    nn::ObserveForward observe(rec);
    seq.forward(x);
  }
  CHECK(rec.events == std::vector<std::string>{"enter Sequential", "enter Linear", "exit Linear [2, 8]", "enter GELU",
                                               "exit GELU [2, 8]", "enter Linear", "exit Linear [2, 3]",
                                               "exit Sequential [2, 3]"});
  // Without an observer nothing is reported, and observers do not outlive their scope.
  rec.events.clear();
  seq.forward(x);
  CHECK(rec.events.empty());
}

TEST_CASE("ForwardScope: an exception closes the scopes it leaves; a base-class forward is one call",
          "[module_trace]") {
  Recorder rec;
  Failing failing;
  {
    nn::ObserveForward observe(rec);
    CHECK_THROWS_WITH(failing.forward(randn({1, 4})), Catch::Contains("on purpose"));
  }
  CHECK(rec.events ==
        std::vector<std::string>{"enter Failing", "enter Linear", "exit Linear [1, 2]", "exit Failing threw"});

  // CoatPatchEmbed::forward runs PatchEmbed::forward on the same module: reported once.
  rec.events.clear();
  models::CoatPatchEmbed embed(4, 3, 8);
  int64_t h = 0, w = 0;
  {
    nn::ObserveForward observe(rec);
    embed.forward(randn({1, 3, 8, 8}), &h, &w);
  }
  CHECK(rec.events == std::vector<std::string>{"enter CoatPatchEmbed", "enter Conv2d", "exit Conv2d [1, 8, 2, 2]",
                                               "enter LayerNorm", "exit LayerNorm [1, 4, 8]",
                                               "exit CoatPatchEmbed [1, 4, 8]"});
}

TEST_CASE("ObserveForward nests: the innermost observer sees the calls, the outer one comes back", "[module_trace]") {
  nn::Linear fc(2, 2);
  Recorder outer, inner;
  nn::ObserveForward observe_outer(outer);
  {
    nn::ObserveForward observe_inner(inner);
    fc.forward(randn({1, 2}));
  }
  fc.forward(randn({1, 2}));
  CHECK(inner.events.size() == 2);
  CHECK(outer.events.size() == 2);
}
