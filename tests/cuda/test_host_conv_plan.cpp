// Convolution plans against cuDNN arguments worked out by hand; in the real build also against
// cuDNN's own output-size computation, from real descriptors (which need no GPU). Needs no device.
#include <catch2/catch.hpp>

#include "tessera/core/backend.h"
#include "tessera/cuda/libs/dnn.h"
#include "tessera/cuda/plans/conv_plan.h"
#include "tessera/ops/ops.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

ConvPlan plan_for(const Shape& x, const Shape& w, const Conv2dParams& p, ConvFormat format = ConvFormat::Nchw) {
  const Shape y{x[0], w[0], out_size(x[2], w[2], p.stride[0], p.padding[0], p.dilation[0]),
                out_size(x[3], w[3], p.stride[1], p.padding[1], p.dilation[1])};
  return plan_conv2d(x, w, p, y, DType::Float32, format);
}

void check_against_cudnn(const ConvPlan& p) {
#if defined(TESSERA_CUDA)
  INFO(p.str());
  CHECK(cudnn_output_dims(p) == std::array<int, 4>{p.n, p.k, p.p, p.q});
#else
  (void)p;
#endif
}

}  // namespace

TEST_CASE("conv plan: padding, strides, dilation, groups", "[cuda][plan]") {
  // A 3x3 padded convolution.
  ConvPlan want;
  want.n = 2, want.c = 3, want.h = 8, want.w = 6, want.k = 16, want.r = 3, want.s = 3;
  want.pad_h = want.pad_w = 1;
  want.p = 8, want.q = 6;
  const ConvPlan p = plan_for({2, 3, 8, 6}, {16, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1});
  CHECK(p == want);
  check_against_cudnn(p);

  // XCiT's conv stem: 3x3, stride 2, padding 1; CoaT's patch embedding: 4x4, stride 4.
  const ConvPlan stem = plan_for({2, 3, 32, 32}, {48, 3, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1});
  CHECK(stem.stride_h == 2);
  CHECK(stem.p == 16);
  CHECK(stem.q == 16);
  check_against_cudnn(stem);
  const ConvPlan patch = plan_for({2, 3, 32, 32}, {64, 3, 4, 4}, {{4, 4}, {0, 0}, {1, 1}, 1});
  CHECK(patch.p == 8);
  check_against_cudnn(patch);

  // Dilated, rectangular, asymmetric strides.
  const ConvPlan dilated = plan_for({1, 4, 11, 9}, {6, 4, 3, 2}, {{2, 1}, {2, 0}, {2, 3}, 1});
  CHECK(dilated.dilation_h == 2);
  CHECK(dilated.dilation_w == 3);
  CHECK(dilated.p == 6);
  CHECK(dilated.q == 6);
  check_against_cudnn(dilated);

  // Grouped and depthwise (CoaT's convolutional position encodings, XCiT's LPI): the filter has
  // C/groups input channels.
  const ConvPlan grouped = plan_for({2, 8, 5, 5}, {12, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4});
  CHECK(grouped.groups == 4);
  CHECK(grouped.channels_per_group() == 2);
  check_against_cudnn(grouped);
  const ConvPlan depthwise = plan_for({2, 8, 5, 5}, {8, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 8});
  CHECK(depthwise.channels_per_group() == 1);
  check_against_cudnn(depthwise);

  // conv1d arrives as conv2d over [N, C, 1, L].
  const ConvPlan conv1d = plan_for({3, 4, 1, 10}, {5, 4, 1, 3}, {{1, 2}, {0, 1}, {1, 1}, 1});
  CHECK(conv1d.h == 1);
  CHECK(conv1d.q == 5);
  check_against_cudnn(conv1d);
  CHECK(conv1d.str().find("groups=1") != std::string::npos);
}

TEST_CASE("conv plan: a depthwise convolution of a channels-last token map in NHWC", "[cuda][plan]") {
  // XCiT's LPI under TESSERA_DEPTHWISE_CUDNN_NHWC: the same dims, cuDNN's NHWC tensor format (its
  // filter [K, R, S, 1] is our [K, 1, R, S]'s memory).
  const Conv2dParams lpi{{1, 1}, {1, 1}, {1, 1}, 384};
  const ConvPlan nhwc = plan_for({2, 384, 14, 14}, {384, 1, 3, 3}, lpi, ConvFormat::Nhwc);
  ConvPlan want = plan_for({2, 384, 14, 14}, {384, 1, 3, 3}, lpi);
  CHECK(want.format == ConvFormat::Nchw);
  want.format = ConvFormat::Nhwc;
  CHECK(nhwc == want);
  CHECK(nhwc.str().find(" nhwc ") != std::string::npos);
  check_against_cudnn(nhwc);
  // A filter of several input channels per group has another memory order in NHWC: refused.
  CHECK_THROWS_WITH(plan_for({2, 8, 5, 5}, {12, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}, ConvFormat::Nhwc),
                    Catch::Contains("NHWC") && Catch::Contains("[12, 2, 3, 3]"));
}

TEST_CASE("conv plan: a tensor beyond cuDNN's int dims is refused", "[cuda][plan]") {
  CHECK_THROWS_WITH(plan_conv2d({1, 1, 70000, 70000}, {1, 1, 1, 1}, {}, {1, 1, 70000, 70000}, DType::Float32),
                    Catch::Contains("conv2d (cuda)") && Catch::Contains("2^31"));
}

#if defined(TESSERA_CUDA)
TEST_CASE("cuDNN handles need a GPU: created where one is usable, refused where none is", "[cuda][plan]") {
  const std::string status = cudnn_handle_status();
  INFO("cudnnCreate: " << status);
  if (device_count(DeviceType::CUDA) > 0) CHECK(status == "CUDNN_STATUS_SUCCESS");
  else CHECK(status != "CUDNN_STATUS_SUCCESS");
}
#endif
