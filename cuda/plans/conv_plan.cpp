#include "tessera/cuda/plans/conv_plan.h"

#include <limits>

#include "tessera/core/error.h"
#include "tessera/core/autocast.h"

namespace tessera::cuda {

std::string ConvPlan::str() const {
  const char* modes[] = {"fma", "tf32", "tensor-op"};
  return detail::concat("conv(", dtype_name(dtype), " ", modes[static_cast<int>(math)],
                        format == ConvFormat::Nhwc ? " nhwc" : "", " x=[", n, ",", c, ",", h, ",", w, "] w=[", k, ",",
                        channels_per_group(), ",", r, ",", s, "] groups=", groups, " pad=", pad_h, ",", pad_w,
                        " stride=", stride_h, ",", stride_w, " dilation=", dilation_h, ",", dilation_w, " y=[", n, ",",
                        k, ",", p, ",", q, "])");
}

ConvPlan plan_conv2d(const Shape& x, const Shape& w, const Conv2dParams& params, const Shape& y, DType dtype,
                     ConvFormat format) {
  const auto narrow = [](int64_t v) {
    TS_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "conv2d (cuda): dimension ", v,
             " exceeds what cuDNN takes (2^31 - 1)");
    return static_cast<int>(v);
  };
  TS_CHECK(numel_of(x) <= std::numeric_limits<int>::max() && numel_of(y) <= std::numeric_limits<int>::max(),
           "conv2d (cuda): tensors of 2^31 elements or more are not supported by cuDNN's 4-d descriptors (input ", x,
           ", output ", y, ")");
  TS_CHECK(format == ConvFormat::Nchw || w[1] == 1,
           "conv2d (cuda): an NHWC plan takes a depthwise filter [K, 1, R, S] ",
           "(the same memory as cuDNN's KRSC), got ", w);
  ConvPlan p;
  p.dtype = dtype;
  p.format = format;
  p.math = dtype == DType::BFloat16 || dtype == DType::Float16 ? ConvMath::TensorOp
           : dtype == DType::Float32 && allow_tf32()           ? ConvMath::AllowTf32
                                                               : ConvMath::Fma;
  p.n = narrow(x[0]);
  p.c = narrow(x[1]);
  p.h = narrow(x[2]);
  p.w = narrow(x[3]);
  p.k = narrow(w[0]);
  p.r = narrow(w[2]);
  p.s = narrow(w[3]);
  p.groups = narrow(params.groups);
  p.pad_h = narrow(params.padding[0]);
  p.pad_w = narrow(params.padding[1]);
  p.stride_h = narrow(params.stride[0]);
  p.stride_w = narrow(params.stride[1]);
  p.dilation_h = narrow(params.dilation[0]);
  p.dilation_w = narrow(params.dilation[1]);
  p.p = narrow(y[2]);
  p.q = narrow(y[3]);
  return p;
}

}  // namespace tessera::cuda
