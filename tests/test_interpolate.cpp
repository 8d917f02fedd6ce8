// interpolate (bilinear / bicubic, align_corners=False): identity at the same size, values against
// a naive reference written from the formulas and against PyTorch, float32 vs float64, float64
// gradient checks for up- and down-sampling and non-contiguous inputs, and error messages.
#include <cmath>

#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr InterpolationMode kModes[] = {InterpolationMode::Bilinear, InterpolationMode::Bicubic};

const char* mode_name(InterpolationMode m) { return m == InterpolationMode::Bilinear ? "bilinear" : "bicubic"; }

// Taps (input index, weight) of output pixel `dst` along one axis, straight from the definition
// of F.interpolate(align_corners=False): src = (dst + 0.5)·in/out − 0.5; bilinear clamps src at
// 0 and the upper tap at in − 1; bicubic uses Keys' kernel (A = −0.75) on the four neighbours of
// floor(src), each clamped into [0, in − 1].
std::vector<std::pair<int64_t, double>> ref_taps(InterpolationMode mode, int64_t in, int64_t out, int64_t dst) {
  double src = (dst + 0.5) * double(in) / double(out) - 0.5;
  if (mode == InterpolationMode::Bilinear) {
    src = std::max(src, 0.0);
    int64_t i0 = int64_t(std::floor(src));
    double t = src - double(i0);
    return {{i0, 1 - t}, {std::min(i0 + 1, in - 1), t}};
  }
  const double A = -0.75;
  auto kernel = [A](double d) {
    d = std::abs(d);
    if (d <= 1) return (A + 2) * d * d * d - (A + 3) * d * d + 1;
    if (d < 2) return A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A;
    return 0.0;
  };
  int64_t f = int64_t(std::floor(src));
  std::vector<std::pair<int64_t, double>> taps;
  for (int64_t k = f - 1; k <= f + 2; ++k) taps.push_back({std::clamp<int64_t>(k, 0, in - 1), kernel(src - double(k))});
  return taps;
}

Tensor reference(const Tensor& x, int64_t oh, int64_t ow, InterpolationMode mode) {
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  std::vector<double> in = x.to_vector<double>(), out(N * C * oh * ow, 0.0);
  for (int64_t p = 0; p < N * C; ++p)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (auto [iy, wy] : ref_taps(mode, H, oh, y))
          for (auto [ix, wx] : ref_taps(mode, W, ow, xx))
            out[(p * oh + y) * ow + xx] += wy * wx * in[(p * H + iy) * W + ix];
  return from_vector(out, {N, C, oh, ow});
}

Tensor squares(int64_t n, const Shape& shape) {  // i² / 10, the input of the PyTorch references
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = double(i * i) / 10;
  return from_vector(v, shape);
}

void check_values(const Tensor& got, const std::vector<double>& expected, double tol) {
  std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == expected.size());
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(expected[i]).epsilon(0).margin(tol));
}

}  // namespace

TEST_CASE("interpolate to the same size is the identity", "[interpolate]") {
  for (InterpolationMode mode : kModes) {
    INFO(mode_name(mode));
    Tensor x = leaf({2, 3, 5, 7}).detach();
    CHECK(max_abs_diff(interpolate(x, {5, 7}, mode), x) == 0.0);
    Tensor xf = x.to(DType::Float32);
    CHECK(max_abs_diff(interpolate(xf, {5, 7}, mode).to(DType::Float64), xf.to(DType::Float64)) == 0.0);
  }
}

TEST_CASE("interpolate matches the naive reference", "[interpolate]") {
  const std::vector<std::array<int64_t, 4>> cases = {{4, 5, 7, 9},  {7, 9, 3, 4},  {3, 8, 6, 3}, {1, 1, 3, 2},
                                                     {10, 3, 1, 1}, {6, 6, 13, 2}, {2, 9, 5, 4}};
  for (InterpolationMode mode : kModes)
    for (auto [H, W, oh, ow] : cases) {
      INFO(mode_name(mode) << " [" << H << ", " << W << "] -> [" << oh << ", " << ow << "]");
      Tensor x = leaf({2, 3, H, W}, -1, 1, uint64_t(H * 31 + W)).detach();
      CHECK(max_abs_diff(interpolate(x, {oh, ow}, mode), reference(x, oh, ow, mode)) < 1e-12);
    }
}

TEST_CASE("interpolate matches PyTorch reference values", "[interpolate]") {
  // x = (torch.arange(12, dtype=torch.float64) ** 2 / 10).reshape(1, 1, 3, 4)
  // F.interpolate(x, size=(4, 6), mode='bilinear', align_corners=False).flatten().tolist()
  const std::vector<double> bilinear_up = {0.0,
                                           0.049999999999999996,
                                           0.14999999999999997,
                                           0.35,
                                           0.65,
                                           0.9,
                                           1.0,
                                           1.2999999999999998,
                                           1.7333333333333334,
                                           2.2666666666666666,
                                           2.9000000000000004,
                                           3.4000000000000004,
                                           3.4000000000000004,
                                           4.0,
                                           4.833333333333333,
                                           5.766666666666667,
                                           6.8,
                                           7.6000000000000005,
                                           6.4,
                                           7.249999999999999,
                                           8.416666666666666,
                                           9.683333333333332,
                                           11.049999999999999,
                                           12.099999999999998};
  // F.interpolate(x, size=(4, 6), mode='bicubic', align_corners=False).flatten().tolist()
  const std::vector<double> bicubic_up = {
      -0.11853976779513892, -0.11629638671875002, -0.041438802083333046, 0.09781901041666674, 0.4143432617187501,
      0.6513088650173613,   0.45062255859375033,  0.6901489257812503,    1.1532371238425931,  1.568768084490741,
      2.27352294921875,     2.7477715386284722,   3.3946899414062517,    4.00516357421875,    5.075177228009261,
      5.922609230324076,    7.2342895507812495,   8.079485405815975,     6.591977267795142,   7.439733886718751,
      8.89797815393519,     10.021683304398149,   11.721594238281249,    12.804073079427086};
  // x2 = (torch.arange(30, dtype=torch.float64) ** 2 / 10).reshape(1, 1, 5, 6)
  // F.interpolate(x2, size=(2, 4), mode='bilinear', align_corners=False).flatten().tolist()
  const std::vector<double> bilinear_down = {
      2.95, 4.6000000000000005, 6.7, 9.25, 39.699999999999996, 45.849999999999994, 52.45, 59.49999999999999};
  // F.interpolate(x2, size=(2, 4), mode='bicubic', align_corners=False).flatten().tolist()
  const std::vector<double> bicubic_down = {1.810845947265625, 3.2932861328125003, 5.3676513671874995,
                                            7.820404052734376, 40.785247802734375, 47.1004638671875,
                                            54.2698486328125,  61.55537719726563};
  Tensor x = squares(12, {1, 1, 3, 4}), x2 = squares(30, {1, 1, 5, 6});
  check_values(interpolate(x, {4, 6}, InterpolationMode::Bilinear), bilinear_up, 1e-12);
  check_values(interpolate(x, {4, 6}, InterpolationMode::Bicubic), bicubic_up, 1e-12);
  check_values(interpolate(x2, {2, 4}, InterpolationMode::Bilinear), bilinear_down, 1e-12);
  check_values(interpolate(x2, {2, 4}, InterpolationMode::Bicubic), bicubic_down, 1e-12);
  // float32 computes in float32, as PyTorch does
  check_values(interpolate(x.to(DType::Float32), {4, 6}, InterpolationMode::Bicubic), bicubic_up, 1e-5);
  check_values(interpolate(x2.to(DType::Float32), {2, 4}, InterpolationMode::Bilinear), bilinear_down, 1e-4);
}

TEST_CASE("float32 interpolate agrees with float64 forward and backward", "[interpolate]") {
  for (InterpolationMode mode : kModes) {
    INFO(mode_name(mode));
    for (std::array<int64_t, 2> size : {std::array<int64_t, 2>{40, 9}, std::array<int64_t, 2>{7, 61}}) {
      Tensor x64 = leaf({2, 16, 17, 23}, -1, 1, 7);
      Tensor x32 = x64.detach().to(DType::Float32).set_requires_grad(true);
      Generator gen(3);
      Tensor g = randn({2, 16, size[0], size[1]}, DType::Float64, &gen);
      Tensor y64 = interpolate(x64, size, mode), y32 = interpolate(x32, size, mode);
      CHECK(max_abs_diff(y64, y32.to(DType::Float64)) < 1e-5);
      y64.backward(g);
      y32.backward(g.to(DType::Float32));
      CHECK(max_abs_diff(x64.grad(), x32.grad().to(DType::Float64)) < 1e-4);
    }
  }
}

TEST_CASE("interpolate errors name the op and the shapes", "[interpolate][errors]") {
  const auto bilinear = InterpolationMode::Bilinear;
  CHECK_THROWS_WITH(interpolate(zeros({3, 4, 5}), {2, 2}, bilinear),
                    Catch::Contains("interpolate") && Catch::Contains("4-d") && Catch::Contains("[3, 4, 5]"));
  CHECK_THROWS_WITH(interpolate(zeros({1, 1, 4, 4}), {0, 3}, bilinear),
                    Catch::Contains("interpolate") && Catch::Contains("positive") && Catch::Contains("[0, 3]"));
  CHECK_THROWS_WITH(interpolate(zeros({1, 1, 4, 4}), {3, -2}, InterpolationMode::Bicubic),
                    Catch::Contains("interpolate") && Catch::Contains("[3, -2]"));
  CHECK_THROWS_WITH(interpolate(zeros({1, 1, 0, 4}), {3, 3}, bilinear),
                    Catch::Contains("interpolate") && Catch::Contains("[1, 1, 0, 4]"));
  CHECK_THROWS_WITH(interpolate(zeros({1, 1, 2, 2}, DType::Int64), {3, 3}, bilinear),
                    Catch::Contains("interpolate") && Catch::Contains("int64"));
}
