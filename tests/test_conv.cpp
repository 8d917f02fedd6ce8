// conv2d / conv1d: forward and all three gradients against a naive 7-loop reference over a grid
// of stride / padding / dilation / groups (dense, grouped, depthwise, depthwise with a channel
// multiplier, pointwise 1x1), float64 gradient checks for input, weight and bias (including a
// non-contiguous input), and error messages.
#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

struct Conv {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

struct Reference {
  Tensor y, gx, gw, gb;
};

// The definition of a zero-padded cross-correlation, and its gradients for upstream gradient gy:
// every (output, kernel tap) pair contributes y += x·w, dx += dy·w, dW += dy·x.
Reference reference_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv& c, const Tensor& gy_in) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / c.groups;
  const int64_t OH = (H + 2 * c.padding[0] - c.dilation[0] * (KH - 1) - 1) / c.stride[0] + 1;
  const int64_t OW = (W + 2 * c.padding[1] - c.dilation[1] * (KW - 1) - 1) / c.stride[1] + 1;
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const std::vector<double> bv = b.defined() ? b.to_vector<double>() : std::vector<double>(O, 0.0);
  const std::vector<double> gy = gy_in.defined() ? gy_in.to_vector<double>() : std::vector<double>(N * O * OH * OW);
  std::vector<double> y(N * O * OH * OW), gx(xv.size()), gw(wv.size()), gb(O);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t yi = ((n * O + o) * OH + oh) * OW + ow;
          double s = bv[o];
          gb[o] += gy[yi];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * c.stride[0] - c.padding[0] + i * c.dilation[0];
                const int64_t iw = ow * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + (o / Og) * Cg + ci) * H + ih) * W + iw;
                const int64_t wi = ((o * Cg + ci) * KH + i) * KW + j;
                s += xv[xi] * wv[wi];
                gx[xi] += gy[yi] * wv[wi];
                gw[wi] += gy[yi] * xv[xi];
              }
          y[yi] = s;
        }
  return {from_vector(y, {N, O, OH, OW}), from_vector(gx, x.shape()), from_vector(gw, w.shape()), from_vector(gb, {O})};
}

Tensor random(const Shape& shape, uint64_t seed, DType dtype = DType::Float64) {
  Generator gen(seed);
  return randn(shape, dtype, &gen);
}

struct GridCase {
  int64_t c, o, groups, kh, kw;
  const char* name;
};

const std::vector<GridCase> kLayouts = {
    {4, 6, 1, 3, 3, "dense 3x3"},     {4, 6, 2, 3, 2, "grouped 3x2"},
    {4, 4, 4, 3, 3, "depthwise 3x3"}, {4, 8, 4, 2, 3, "depthwise x2 multiplier"},
    {3, 5, 1, 1, 1, "pointwise 1x1"}, {6, 3, 3, 1, 2, "grouped, 2 inputs per output"},
};

}  // namespace

TEST_CASE("conv2d forward and backward match the naive loops over a parameter grid", "[conv]") {
  const std::vector<Conv> params = {
      {{1, 1}, {0, 0}, {1, 1}}, {{2, 2}, {1, 1}, {1, 1}}, {{2, 1}, {0, 2}, {1, 1}},
      {{1, 1}, {1, 1}, {2, 2}}, {{1, 3}, {2, 1}, {2, 1}}, {{1, 1}, {2, 3}, {1, 1}},  // padding > kernel
  };
  for (const GridCase& lc : kLayouts)
    for (const Conv& base : params)
      for (int64_t n : {1, 2, 3}) {  // one image, a balanced and an unbalanced batch for 2 threads
        Conv c = base;
        c.groups = lc.groups;
        INFO(lc.name << ", n " << n << ", stride " << c.stride[0] << "x" << c.stride[1] << ", padding " << c.padding[0]
                     << "x" << c.padding[1] << ", dilation " << c.dilation[0] << "x" << c.dilation[1]);
        Tensor x = random({n, lc.c, 7, 6}, 1), w = random({lc.o, lc.c / lc.groups, lc.kh, lc.kw}, 2);
        Tensor b = random({lc.o}, 3);
        Tensor xl = x.clone().set_requires_grad(true), wl = w.clone().set_requires_grad(true),
               bl = b.clone().set_requires_grad(true);
        Tensor y = conv2d(xl, wl, bl, c.stride, c.padding, c.dilation, c.groups);
        Tensor gy = random(y.shape(), 4);
        Reference ref = reference_conv(x, w, b, c, gy);
        REQUIRE(y.shape() == ref.y.shape());
        CHECK(max_abs_diff(y, ref.y) < 1e-12);
        y.backward(gy);
        CHECK(max_abs_diff(xl.grad(), ref.gx) < 1e-12);
        CHECK(max_abs_diff(wl.grad(), ref.gw) < 1e-12);
        CHECK(max_abs_diff(bl.grad(), ref.gb) < 1e-12);
        // float32 kernels, without bias
        Tensor y32 =
            conv2d(x.to(DType::Float32), w.to(DType::Float32), Tensor(), c.stride, c.padding, c.dilation, c.groups);
        CHECK(max_abs_diff(y32.to(DType::Float64), ref.y - b.view({-1, 1, 1})) < 1e-4);
      }
}

TEST_CASE("conv2d on larger float32 inputs agrees with float64", "[conv]") {
  // Sizes where the GEMMs are blocked and threaded, and depthwise with C in the hundreds.
  struct Big {
    Shape x;
    int64_t o, k, stride, padding, groups;
  };
  for (const Big& t : {Big{{4, 3, 33, 30}, 16, 3, 2, 1, 1}, Big{{2, 24, 17, 17}, 40, 3, 2, 1, 1},
                       Big{{4, 96, 9, 9}, 96, 7, 1, 3, 96}, Big{{3, 64, 12, 12}, 64, 5, 1, 2, 64}}) {
    INFO("x " << shape_str(t.x) << " groups " << t.groups);
    Tensor x = random(t.x, 5), w = random({t.o, t.x[1] / t.groups, t.k, t.k}, 6), b = random({t.o}, 7);
    Tensor y64 = conv2d(x, w, b, {t.stride, t.stride}, {t.padding, t.padding}, {1, 1}, t.groups);
    Tensor y32 = conv2d(x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32), {t.stride, t.stride},
                        {t.padding, t.padding}, {1, 1}, t.groups);
    Conv c{{t.stride, t.stride}, {t.padding, t.padding}, {1, 1}, t.groups};
    CHECK(max_abs_diff(y64, reference_conv(x, w, b, c, Tensor()).y) < 1e-10);
    CHECK(max_abs_diff(y32.to(DType::Float64), y64) < 1e-3);
  }
}

// The channels-last depthwise kernels (ops/cpu/conv_depthwise_channels_last.cpp): token maps and
// permuted [N, H, W, C] maps, with upstream gradients laid out the same way, at channel counts that
// take whole SIMD packets, a half packet and single channels (29 = 16 + 8 + 5 floats, 3·8 + 4 + 1
// doubles), and strides where the input gradient takes the plane kernel instead.
TEST_CASE("depthwise conv2d of channels-last maps matches the naive loops", "[conv]") {
  struct Case {
    int64_t k, stride, padding, dilation;
    bool bias;
  };
  const int64_t C = 29, H = 9, W = 7;
  for (DType dtype : {DType::Float64, DType::Float32})
    for (const Case& t : {Case{3, 1, 1, 1, true}, Case{5, 1, 2, 1, false}, Case{7, 1, 3, 1, true},
                          Case{3, 1, 2, 2, true}, Case{3, 2, 1, 1, true}, Case{5, 1, 0, 1, true}})
      for (bool token_view : {false, true}) {
        INFO("dtype " << dtype_name(dtype) << ", k " << t.k << ", stride " << t.stride << ", padding " << t.padding
                      << ", dilation " << t.dilation << (token_view ? ", a slice of wider tokens" : ", permuted map"));
        const Tensor x = random({2, C, H, W}, 21), w = random({C, 1, t.k, t.k}, 22), b = random({C}, 23);
        // Channels adjacent: a permuted contiguous [N, H, W, C], or the last C of [N, H·W, 2C] tokens.
        Tensor x_last = x.permute({0, 2, 3, 1}).contiguous().to(dtype);
        if (token_view) {
          x_last = cat({random({2, H, W, C}, 24).to(dtype), x_last}, 3).narrow(3, C, C);
          REQUIRE(x_last.stride(2) == 2 * C);
        }
        x_last = x_last.permute({0, 3, 1, 2}).detach().set_requires_grad(true);
        REQUIRE(x_last.stride(1) == 1);
        const Tensor wl = w.to(dtype).detach().set_requires_grad(true),
                     bl = b.to(dtype).detach().set_requires_grad(true);
        const Conv c{{t.stride, t.stride}, {t.padding, t.padding}, {t.dilation, t.dilation}, C};
        Tensor y = conv2d(x_last, wl, t.bias ? bl : Tensor(), c.stride, c.padding, c.dilation, C);
        const Tensor gy = random(y.shape(), 25);
        const Reference ref = reference_conv(x, w, t.bias ? b : Tensor(), c, gy);
        y.backward(gy.to(dtype).permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}));
        const double tol = dtype == DType::Float64 ? 1e-12 : 1e-4;
        CHECK(max_abs_diff(y.to(DType::Float64), ref.y) < tol);
        CHECK(max_abs_diff(x_last.grad().to(DType::Float64), ref.gx) < tol);
        CHECK(max_abs_diff(wl.grad().to(DType::Float64), ref.gw) < tol * 10);
        if (t.bias) CHECK(max_abs_diff(bl.grad().to(DType::Float64), ref.gb) < tol * 10);
      }
}

TEST_CASE("conv2d over planes split into several im2col blocks", "[conv]") {
  // Output planes larger than one im2col block (blocks end mid-row), including a pointwise
  // convolution, which reads the image directly; gradients against the reference too.
  struct Blocked {
    Shape x;
    int64_t o, k, padding;
  };
  for (const Blocked& t : {Blocked{{2, 16, 40, 40}, 8, 3, 1}, Blocked{{2, 64, 40, 40}, 8, 1, 0}}) {
    INFO("x " << shape_str(t.x) << " k " << t.k);
    Tensor x = random(t.x, 1).set_requires_grad(true), w = random({t.o, t.x[1], t.k, t.k}, 2).set_requires_grad(true);
    Tensor y = conv2d(x, w, Tensor(), {1, 1}, {t.padding, t.padding});
    Tensor gy = random(y.shape(), 3);
    Reference ref = reference_conv(x.detach(), w.detach(), Tensor(), Conv{{1, 1}, {t.padding, t.padding}}, gy);
    CHECK(max_abs_diff(y, ref.y) < 1e-10);
    y.backward(gy);
    CHECK(max_abs_diff(x.grad(), ref.gx) < 1e-10);
    CHECK(max_abs_diff(w.grad(), ref.gw) < 1e-9);
  }
}

TEST_CASE("conv1d is conv2d over a unit H dim", "[conv]") {
  Tensor x = random({2, 4, 11}, 1), w = random({6, 2, 3}, 2), b = random({6}, 3);
  Tensor y = conv1d(x, w, b, 2, 1, 2, 2);
  // (11 + 2·1 − 2·2 − 1) / 2 + 1 = 5
  REQUIRE(y.shape() == Shape{2, 6, 5});
  Conv c{{1, 2}, {0, 1}, {1, 2}, 2};
  Tensor ref = reference_conv(x.unsqueeze(2), w.unsqueeze(2), b, c, Tensor()).y.squeeze(2);
  CHECK(max_abs_diff(y, ref) < 1e-12);
}

TEST_CASE("conv errors name the op and the shapes", "[conv][errors]") {
  Tensor x = zeros({2, 6, 5, 5});
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 4, 3, 3})),
                    Catch::Contains("conv2d") && Catch::Contains("C/groups = 6") && Catch::Contains("[8, 4, 3, 3]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 3, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 4),
                    Catch::Contains("conv2d") && Catch::Contains("groups = 4") && Catch::Contains("[2, 6, 5, 5]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({7, 3, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2),
                    Catch::Contains("conv2d") && Catch::Contains("output channels") && Catch::Contains("[7, 3, 3, 3]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 6, 7, 3})), Catch::Contains("conv2d") &&
                                                        Catch::Contains("larger than the padded input") &&
                                                        Catch::Contains("[8, 6, 7, 3]"));
  CHECK_NOTHROW(conv2d(x, zeros({8, 6, 7, 3}), Tensor(), {1, 1}, {1, 1}));  // padding makes it fit
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 6, 3, 3}), Tensor(), {1, 1}, {0, 0}, {3, 3}),
                    Catch::Contains("conv2d") && Catch::Contains("dilated extent 7"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 6, 3, 3}), zeros({6})),
                    Catch::Contains("conv2d") && Catch::Contains("bias") && Catch::Contains("[6]"));
  CHECK_THROWS_WITH(conv2d(zeros({6, 5, 5}), zeros({8, 6, 3, 3})),
                    Catch::Contains("conv2d") && Catch::Contains("[N, C, H, W]") && Catch::Contains("[6, 5, 5]"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 6, 3, 3}), Tensor(), {0, 1}),
                    Catch::Contains("conv2d") && Catch::Contains("stride"));
  CHECK_THROWS_WITH(conv2d(x, zeros({8, 6, 3, 3}, DType::Float64)),
                    Catch::Contains("conv2d") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(conv1d(zeros({2, 6, 5}), zeros({8, 3, 3})),
                    Catch::Contains("conv1d") && Catch::Contains("C/groups = 6") && Catch::Contains("[8, 3, 3]"));
  CHECK_THROWS_WITH(conv1d(x, zeros({8, 6, 3})), Catch::Contains("conv1d") && Catch::Contains("[N, C, L]"));
}
