// tessera_demo: end-to-end check of the tensor engine and autograd. Fits a small MLP
// (2 -> 64 -> 64 -> 3, GELU) to a synthetic three-armed spiral (the classic non-linearly-separable
// toy problem: arm k has points at radius r ∈ [0, 1] and angle 4k + 4r + noise) with full-batch Adam
// (Kingma & Ba, 2015) written here with in-place tensor ops under NoGradGuard. Prints the loss and
// training accuracy as it goes and ends with `final train accuracy: X%`; exits non-zero if the loss
// stops being finite.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/core/parallel.h"
#include "tessera/ops/ops.h"

using namespace tessera;

namespace {

constexpr int64_t kClasses = 3;
constexpr int64_t kPointsPerClass = 100;
constexpr int64_t kHidden = 64;

struct Options {
  int steps = 1000;
  double lr = 1e-2;
  uint64_t seed = 0;
  int threads = 1;  // the tensors are tiny: threading costs more than it gains
  int log_every = 100;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr,
               "tessera_demo: %s\n"
               "usage: tessera_demo [--steps N] [--lr X] [--seed N] [--threads N] [--log-every N]\n"
               "  --steps N      optimisation steps (default 1000)\n"
               "  --lr X         Adam learning rate, > 0 (default 0.01)\n"
               "  --seed N       seed of the data and the initial weights (default 0)\n"
               "  --threads N    CPU threads (default 1)\n"
               "  --log-every N  print loss/accuracy every N steps (default 100)\n",
               msg.c_str());
  std::exit(2);
}

long long parse_int(const std::string& flag, const char* text, long long min) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > 1000000000)
    usage_error(flag + " expects an integer >= " + std::to_string(min) + ", got '" + text + "'");
  return v;
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") usage_error("help");
    if (a != "--steps" && a != "--lr" && a != "--seed" && a != "--threads" && a != "--log-every")
      usage_error("unknown option '" + a + "'");
    if (i + 1 >= argc) usage_error(a + " needs a value");
    const char* v = argv[++i];
    if (a == "--steps") opt.steps = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--seed") opt.seed = static_cast<uint64_t>(parse_int(a, v, 0));
    else if (a == "--threads") opt.threads = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--log-every") opt.log_every = static_cast<int>(parse_int(a, v, 1));
    else {
      char* end = nullptr;
      opt.lr = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(opt.lr > 0) || !std::isfinite(opt.lr))
        usage_error("--lr expects a positive number, got '" + std::string(v) + "'");
    }
  }
  return opt;
}

// Points [3·100, 2] and their int64 labels.
std::pair<Tensor, Tensor> make_spiral(Generator& gen) {
  std::vector<float> xy;
  std::vector<int64_t> labels;
  for (int64_t k = 0; k < kClasses; ++k) {
    for (int64_t i = 0; i < kPointsPerClass; ++i) {
      const double r = double(i) / (kPointsPerClass - 1);
      const double angle = 4.0 * k + 4.0 * r + 0.2 * gen.normal();
      xy.push_back(static_cast<float>(r * std::sin(angle)));
      xy.push_back(static_cast<float>(r * std::cos(angle)));
      labels.push_back(k);
    }
  }
  const int64_t n = kClasses * kPointsPerClass;
  return {from_vector(xy, {n, 2}), from_vector(labels, {n})};
}

struct Layer {
  Tensor weight, bias;
};

// LeCun-style init: weights ~ N(0, 1/fan_in) truncated at two standard deviations, zero bias.
Layer make_layer(int64_t in, int64_t out, Generator& gen) {
  const double std = 1.0 / std::sqrt(double(in));
  Layer l{trunc_normal({out, in}, 0.0, std, -2 * std, 2 * std, DType::Float32, &gen), zeros({out})};
  l.weight.set_requires_grad(true);
  l.bias.set_requires_grad(true);
  return l;
}

Tensor mlp(const std::vector<Layer>& layers, Tensor h) {
  for (size_t i = 0; i < layers.size(); ++i) {
    h = linear(h, layers[i].weight, layers[i].bias);
    if (i + 1 < layers.size()) h = gelu(h);
  }
  return h;
}

// Adam with bias correction; the moment buffers live alongside each parameter.
class Adam {
 public:
  Adam(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
    for (const Tensor& p : params_) {
      m_.push_back(zeros_like(p));
      v_.push_back(zeros_like(p));
    }
  }

  void step() {
    NoGradGuard no_grad;
    ++t_;
    const double c1 = 1.0 - std::pow(kBeta1, t_), c2 = 1.0 - std::pow(kBeta2, t_);
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& g = params_[i].grad();
      if (!g.defined()) continue;
      m_[i].mul_(kBeta1).add_(g, 1.0 - kBeta1);
      v_[i].mul_(kBeta2).add_(g * g, 1.0 - kBeta2);
      params_[i].add_((m_[i] / c1) / (sqrt(v_[i] / c2) + kEps), -lr_);
    }
  }

  void zero_grad() {
    for (const Tensor& p : params_) p.set_grad(Tensor());
  }

 private:
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
  std::vector<Tensor> params_, m_, v_;
  double lr_;
  int t_ = 0;
};

double accuracy(const Tensor& logits, const Tensor& labels) {
  std::vector<int64_t> pred = argmax(logits, 1).to_vector<int64_t>();
  std::vector<int64_t> truth = labels.to_vector<int64_t>();
  int64_t correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
  return 100.0 * double(correct) / double(pred.size());
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    set_num_threads(opt.threads);
    Generator gen(opt.seed);
    auto [x, y] = make_spiral(gen);
    std::vector<Layer> layers{make_layer(2, kHidden, gen), make_layer(kHidden, kHidden, gen),
                              make_layer(kHidden, kClasses, gen)};
    std::vector<Tensor> params;
    for (const Layer& l : layers) params.insert(params.end(), {l.weight, l.bias});
    Adam adam(params, opt.lr);

    std::printf("spiral: %lld points, %lld classes; MLP 2-%lld-%lld-%lld GELU; Adam lr %g; %d steps\n",
                static_cast<long long>(x.size(0)), static_cast<long long>(kClasses), static_cast<long long>(kHidden),
                static_cast<long long>(kHidden), static_cast<long long>(kClasses), opt.lr, opt.steps);
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 1; step <= opt.steps; ++step) {
      adam.zero_grad();
      Tensor logits = mlp(layers, x);
      Tensor loss = cross_entropy(logits, y);
      const double l = loss.item();
      if (!std::isfinite(l)) {
        std::fflush(stdout);
        std::fprintf(stderr, "tessera_demo: error: the loss became %s at step %d; try a smaller --lr (now %g)\n",
                     std::isnan(l) ? "NaN" : "infinite", step, opt.lr);
        return 1;
      }
      loss.backward();
      adam.step();
      if (step % opt.log_every == 0 || step == 1 || step == opt.steps)
        std::printf("step %5d  loss %.4f  train accuracy %5.1f%%\n", step, l, accuracy(logits, y));
    }
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = mlp(layers, x);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("trained in %.2f s\nfinal train accuracy: %.1f%%\n", secs, accuracy(logits, y));
  } catch (const Error& e) {
    std::fprintf(stderr, "tessera_demo: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
