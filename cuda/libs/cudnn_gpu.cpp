// Convolution plans on a GPU through cuDNN's convolution API: descriptors from the plan (NCHW or
// NHWC tensors, a [K, C/groups, R, S] filter in the same format, a cross-correlation with the
// plan's padding, strides, dilations, group count and math mode), the algorithm cuDNN's heuristic
// ranks first among those that fit the workspace — among the deterministic ones only under
// --deterministic (core/autocast.h), as PyTorch's cudnn.deterministic — both kept per plan
// (cuda/libs/algorithm_cache.h), and the call on the device's stream.
// First run on an H100 on 2026-11-27 (docs/gpu-report-2026-11-27.md); built in CI.
#include <cudnn.h>

#include <memory>
#include <string>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/cuda/device.h"
#include "tessera/core/autocast.h"
#include "tessera/cuda/libs/algorithm_cache.h"
#include "tessera/cuda/libs/dnn.h"
#include "tessera/cuda/per_device.h"

namespace tessera::cuda {

namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

void check_dnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw Error(detail::concat("conv2d: ", what, ": ", cudnnGetErrorString(status)));
}

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Float16: return CUDNN_DATA_HALF;
    default: throw Error(detail::concat("conv2d (cuda): dtype ", dtype_name(dtype), " is not supported"));
  }
}

// The convolution accumulates in float32 for the half types (cuDNN's "pseudo half" configuration).
cudnnDataType_t compute_type(DType dtype) { return dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }

cudnnMathType_t math_type(ConvMath math) {
  switch (math) {
    case ConvMath::Fma: return CUDNN_FMA_MATH;
    case ConvMath::AllowTf32: return CUDNN_DEFAULT_MATH;
    case ConvMath::TensorOp: return CUDNN_TENSOR_OP_MATH;
  }
  return CUDNN_FMA_MATH;
}

struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit Descriptors(const ConvPlan& p) {
    const cudnnDataType_t type = data_type(p.dtype);
    check_dnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check_dnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check_dnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check_dnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    // An NHWC filter is [K, R, S, C/groups]: for the depthwise filters NHWC plans take (C/groups =
    // 1) the same memory as our [K, 1, R, S], so the weight and its gradient need no copy.
    const cudnnTensorFormat_t format = p.format == ConvFormat::Nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check_dnn(cudnnSetTensor4dDescriptor(x, format, type, p.n, p.c, p.h, p.w), "input descriptor");
    check_dnn(cudnnSetTensor4dDescriptor(y, format, type, p.n, p.k, p.p, p.q), "output descriptor");
    check_dnn(cudnnSetFilter4dDescriptor(w, type, format, p.k, p.channels_per_group(), p.r, p.s), "filter descriptor");
    check_dnn(cudnnSetConvolution2dDescriptor(conv, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dilation_h,
                                              p.dilation_w, CUDNN_CROSS_CORRELATION, compute_type(p.dtype)),
              "convolution descriptor");
    check_dnn(cudnnSetConvolutionGroupCount(conv, p.groups), "group count");
    check_dnn(cudnnSetConvolutionMathType(conv, math_type(p.math)), "math type");
  }
  ~Descriptors() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

cudnnHandle_t handle_of(int device, cudaStream_t stream) {
  static auto* handles = new PerDevice<cudnnHandle_t>;
  cudnnHandle_t h = handles->get(device, [device] {
    auto handle = std::make_unique<cudnnHandle_t>();
    DeviceGuard guard(Device::cuda(device));
    check_dnn(cudnnCreate(handle.get()), "cudnnCreate");
    return handle;
  });
  check_dnn(cudnnSetStream(h, stream), "cudnnSetStream");
  return h;
}

// The plan in words, for errors: what cuDNN was asked to convolve.
std::string describe(const ConvPlan& p) {
  return detail::concat(dtype_name(p.dtype), p.format == ConvFormat::Nhwc ? " NHWC" : "", " input ", p.n, "x", p.c, "x",
                        p.h, "x", p.w, ", ", p.k, " filters ", p.r, "x", p.s, ", groups ", p.groups, ", stride ",
                        p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w, ", dilation ", p.dilation_h,
                        "x", p.dilation_w);
}

// One of cuDNN's ranked algorithms: its enum and the workspace it needs.
struct Candidate {
  int algo;
  size_t memory;
};

// cuDNN's ranked results that succeeded, fit the workspace limit and, when asked, are
// deterministic, best first.
template <class Perf>
std::vector<Candidate> candidates(const Perf* results, int count, bool deterministic, const char* what,
                                  const ConvPlan& p) {
  std::vector<Candidate> out;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status == CUDNN_STATUS_SUCCESS && r.memory <= kMaxWorkspaceBytes &&
        (!deterministic || r.determinism == CUDNN_DETERMINISTIC))
      out.push_back({static_cast<int>(r.algo), r.memory});
  }
  if (out.empty())
    throw Error(detail::concat("conv2d: cuDNN offers no ", deterministic ? "deterministic " : "", "algorithm for the ",
                               what, " of ", describe(p)));
  return out;
}

Tensor workspace(size_t bytes, int device) {
  return Tensor::empty({static_cast<int64_t>((bytes + 7) / 8)}, DType::Float64, Device::cuda(device));
}

struct Scalars {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  const void* one(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d0) : &f0; }
};

// One direction's descriptors and the algorithms ranked for them, cached per plan: `pick` is the
// one in use, the first that has not been refused at run time.
struct ChosenConv {
  explicit ChosenConv(const ConvPlan& p) : d(p) {}
  Descriptors d;
  std::vector<Candidate> ranked;
  size_t pick = 0;
};

enum class Direction { Forward, BackwardData, BackwardFilter };

// What decides the descriptors and the algorithm: the plan, the direction and determinism.
struct ConvKey {
  ConvPlan plan;
  Direction direction;
  bool deterministic;
  bool operator==(const ConvKey&) const = default;
  size_t hash() const {
    const ConvPlan& p = plan;
    return hash_fields({static_cast<int64_t>(p.dtype),
                        static_cast<int64_t>(p.math),
                        static_cast<int64_t>(p.format),
                        p.n,
                        p.c,
                        p.h,
                        p.w,
                        p.k,
                        p.r,
                        p.s,
                        p.groups,
                        p.pad_h,
                        p.pad_w,
                        p.stride_h,
                        p.stride_w,
                        p.dilation_h,
                        p.dilation_w,
                        p.p,
                        p.q,
                        static_cast<int64_t>(direction),
                        deterministic});
  }
};

AlgorithmCache<ConvKey, ChosenConv>& cache_of(int device) {
  static auto* caches = new PerDevice<AlgorithmCache<ConvKey, ChosenConv>>;
  return caches->get(device, [] { return std::make_unique<AlgorithmCache<ConvKey, ChosenConv>>(); });
}

// Each direction's ranking call: cuDNN has one per direction, with its own result type.
template <Direction D>
struct Ranking;
template <>
struct Ranking<Direction::Forward> {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr const char* kCall = "cudnnGetConvolutionForwardAlgorithm_v7";
  static constexpr const char* kWhat = "forward pass";
  static cudnnStatus_t rank(cudnnHandle_t h, const Descriptors& d, int* count, Perf* results) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kCount, count, results);
  }
};
template <>
struct Ranking<Direction::BackwardData> {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr const char* kCall = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  static constexpr const char* kWhat = "input gradient";
  static cudnnStatus_t rank(cudnnHandle_t h, const Descriptors& d, int* count, Perf* results) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, kCount, count, results);
  }
};
template <>
struct Ranking<Direction::BackwardFilter> {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr const char* kCall = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  static constexpr const char* kWhat = "filter gradient";
  static cudnnStatus_t rank(cudnnHandle_t h, const Descriptors& d, int* count, Perf* results) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, kCount, count, results);
  }
};

// Asks cuDNN's heuristic for direction D's ranked algorithms and keeps the first that fits
// (deterministic ones only for the gradients under set_deterministic_algorithms).
template <Direction D>
std::unique_ptr<ChosenConv> choose_conv(const ConvPlan& p, cudnnHandle_t h) {
  using R = Ranking<D>;
  auto chosen = std::make_unique<ChosenConv>(p);
  typename R::Perf results[R::kCount];
  int count = 0;
  check_dnn(R::rank(h, chosen->d, &count, results), R::kCall);
  chosen->ranked = candidates(results, count, deterministic_algorithms(), R::kWhat, p);
  return chosen;
}

// The cached choice for (plan, direction, determinism), made on first use.
template <Direction D>
ChosenConv& chosen_conv(const ConvPlan& p, cudnnHandle_t h, int device, std::unique_ptr<ChosenConv>& uncached) {
  return cache_of(device).get({p, D, deterministic_algorithms()}, uncached, [&] { return choose_conv<D>(p, h); });
}

// Runs `call(algo, workspace, bytes)` with the algorithm in use. cuDNN's heuristic ranks some
// algorithms that its call then refuses for the configuration (seen on an H100: CoaT-Lite Small's
// filter gradients in bfloat16 failed with CUDNN_STATUS_BAD_PARAM); a refused one (a parameter or
// support error, nothing launched) gives way to the next in the ranking, which is kept for the
// plan, as PyTorch tries its ranked algorithms in turn.
template <class Call>
void run_ranked(ChosenConv& c, const ConvPlan& p, int device, const char* what, const Call& call) {
  std::string refused;
  for (; c.pick < c.ranked.size(); ++c.pick) {
    const Candidate& a = c.ranked[c.pick];
    const Tensor ws = workspace(a.memory, device);
    const cudnnStatus_t status = call(a.algo, ws.device_raw_data(), a.memory);
    if (status == CUDNN_STATUS_SUCCESS) return;
    const int category = CUDNN_STATUS_CATEGORY(status);
    if (category != CUDNN_STATUS_BAD_PARAM && category != CUDNN_STATUS_NOT_SUPPORTED) check_dnn(status, what);
    refused += detail::concat(refused.empty() ? "" : "; ", "algorithm ", a.algo, ": ", cudnnGetErrorString(status));
  }
  c.pick = 0;  // the next call tries them again, and reports the same
  throw Error(detail::concat("conv2d: ", what, ": cuDNN refused every algorithm it ranked for ", describe(p), " (",
                             refused, ")"));
}

}  // namespace

void conv_forward(const ConvPlan& p, const void* x, const void* w, void* y, cudaStream_t stream, int device) {
  cudnnHandle_t h = handle_of(device, stream);
  std::unique_ptr<ChosenConv> uncached;
  ChosenConv& c = chosen_conv<Direction::Forward>(p, h, device, uncached);
  const Scalars s;
  run_ranked(c, p, device, "cudnnConvolutionForward", [&](int algo, void* ws, size_t bytes) {
    return cudnnConvolutionForward(h, s.one(p.dtype), c.d.x, x, c.d.w, w, c.d.conv,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, bytes, s.zero(p.dtype), c.d.y, y);
  });
}

void conv_backward_data(const ConvPlan& p, const void* w, const void* dy, void* dx, cudaStream_t stream, int device) {
  cudnnHandle_t h = handle_of(device, stream);
  std::unique_ptr<ChosenConv> uncached;
  ChosenConv& c = chosen_conv<Direction::BackwardData>(p, h, device, uncached);
  const Scalars s;
  run_ranked(c, p, device, "cudnnConvolutionBackwardData", [&](int algo, void* ws, size_t bytes) {
    return cudnnConvolutionBackwardData(h, s.one(p.dtype), c.d.w, w, c.d.y, dy, c.d.conv,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws, bytes, s.zero(p.dtype),
                                        c.d.x, dx);
  });
}

void conv_backward_filter(const ConvPlan& p, const void* x, const void* dy, void* dw, cudaStream_t stream, int device) {
  cudnnHandle_t h = handle_of(device, stream);
  std::unique_ptr<ChosenConv> uncached;
  ChosenConv& c = chosen_conv<Direction::BackwardFilter>(p, h, device, uncached);
  const Scalars s;
  run_ranked(c, p, device, "cudnnConvolutionBackwardFilter", [&](int algo, void* ws, size_t bytes) {
    return cudnnConvolutionBackwardFilter(h, s.one(p.dtype), c.d.x, x, c.d.y, dy, c.d.conv,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, bytes,
                                          s.zero(p.dtype), c.d.w, dw);
  });
}

std::array<int, 4> cudnn_output_dims(const ConvPlan& p) {
  Descriptors d(p);
  std::array<int, 4> dims{};
  check_dnn(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &dims[0], &dims[1], &dims[2], &dims[3]),
            "cudnnGetConvolution2dForwardOutputDim");
  return dims;
}

std::string cudnn_handle_status() {
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t status = cudnnCreate(&h);
  if (status == CUDNN_STATUS_SUCCESS) cudnnDestroy(h);
  return cudnnGetErrorString(status);
}

}  // namespace tessera::cuda
