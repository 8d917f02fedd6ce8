// GEMM plans on a GPU through cuBLASLt. Each call of a plan becomes one cublasLtMatmul: a matmul
// descriptor (compute type FP32 for float32 — TF32 only when the plan allows it, so results
// otherwise stay within float32 rounding of the CPU's —, FP32 for bfloat16/float16 operands on
// tensor cores, FP64 for float64; the op flags; the epilogue: the bias added, or the bias gradient
// written, through CUBLASLT_MATMUL_DESC_BIAS_POINTER in D's dtype), one matrix layout per operand
// with the strided batch, and the algorithm cuBLASLt's heuristic ranks first for them and for the
// operands' alignment, both kept per shape (cuda/libs/algorithm_cache.h).
// First run on an H100 on 2026-11-27 (docs/gpu-report-2026-11-27.md); built in CI.
#include <cublasLt.h>

#include <array>
#include <memory>

#include "tessera/core/error.h"
#include "tessera/cuda/device.h"
#include "tessera/cuda/libs/algorithm_cache.h"
#include "tessera/cuda/libs/blas.h"
#include "tessera/cuda/per_device.h"

namespace tessera::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32 << 20;

void check_blas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(
      detail::concat("matmul: ", what, ": ", cublasGetStatusString(status), " (", cublasGetStatusName(status), ")"));
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float16: return CUDA_R_16F;
    default: throw Error(detail::concat("matmul (cuda): dtype ", dtype_name(dtype), " is not supported"));
  }
}

cublasComputeType_t compute_type(const GemmPlan& plan) {
  if (plan.dtype == DType::Float64) return CUBLAS_COMPUTE_64F;
  return plan.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// alpha and beta are in the scale type: double for float64, float otherwise.
cudaDataType_t scale_type(DType dtype) { return dtype == DType::Float64 ? CUDA_R_64F : CUDA_R_32F; }

cublasOperation_t blas_op(BlasOp op) { return op == BlasOp::N ? CUBLAS_OP_N : CUBLAS_OP_T; }

// The descriptors of one call; destroyed with the object.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Descriptors() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                 int64_t batch, int64_t stride) {
  check_blas(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
             "cublasLtMatrixLayoutCreate");
  if (batch == 1) return;
  const int32_t count = static_cast<int32_t>(batch);
  check_blas(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
             "batch count");
  check_blas(
      cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
      "batch stride");
}

cublasLtEpilogue_t blas_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::BGradB: return CUBLASLT_EPILOGUE_BGRADB;
    case GemmEpilogue::None: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The epilogue's vector of a call: the bias it reads or the bias gradient it writes (one attribute).
const void* epilogue_vector(const GemmCall& c, const GemmPointers& p) {
  return c.epilogue == GemmEpilogue::BGradB ? p.bias_grad : p.bias;
}

void set_epilogue_vector(cublasLtMatmulDesc_t op, const void* vector) {
  check_blas(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof vector),
             "bias pointer");
}

// Descriptors of `c` (the epilogue's vector set when it has one).
void describe(const GemmCall& c, const GemmPlan& plan, const void* vector, Descriptors& d) {
  const cudaDataType_t type = data_type(plan.dtype);
  check_blas(cublasLtMatmulDescCreate(&d.op, compute_type(plan), scale_type(plan.dtype)), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = blas_op(c.transa), tb = blas_op(c.transb);
  check_blas(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check_blas(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  if (c.epilogue != GemmEpilogue::None) {
    const cublasLtEpilogue_t epilogue = blas_epilogue(c.epilogue);
    check_blas(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
               "epilogue");
    // The vector's type is D's (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE left at its default).
    set_epilogue_vector(d.op, vector);
  }
  make_layout(&d.a, type, c.transa == BlasOp::N ? c.m : c.k, c.transa == BlasOp::N ? c.k : c.m, c.lda, c.batch,
              c.stride_a);
  make_layout(&d.b, type, c.transb == BlasOp::N ? c.k : c.n, c.transb == BlasOp::N ? c.n : c.k, c.ldb, c.batch,
              c.stride_b);
  make_layout(&d.c, type, c.m, c.n, c.ldc, c.batch, c.stride_c);
}

// One call's descriptors and the algorithm the heuristic chose for them (cached per shape), or,
// for a bias-gradient epilogue, that it offered none (`found` false).
struct ChosenGemm {
  Descriptors d;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};

// A handle, a workspace and the chosen algorithms per device, for the life of the process.
struct GemmKey {
  GemmCall call;
  DType dtype;
  bool tf32;
  std::array<uint32_t, 3> alignment;
  bool operator==(const GemmKey&) const = default;
  size_t hash() const {
    const GemmCall& c = call;
    return hash_fields({static_cast<int64_t>(c.transa), static_cast<int64_t>(c.transb), c.m, c.n, c.k, c.lda, c.ldb,
                        c.ldc, c.batch, c.stride_a, c.stride_b, c.stride_c, static_cast<int64_t>(c.epilogue),
                        static_cast<int64_t>(dtype), tf32, alignment[0], alignment[1], alignment[2]});
  }
};

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;
  AlgorithmCache<GemmKey, ChosenGemm> cache;
};

DeviceState& state_of(int device) {
  static auto* states = new PerDevice<DeviceState>;
  return states->get(device, [device] {
    auto s = std::make_unique<DeviceState>();
    DeviceGuard guard(Device::cuda(device));
    check_blas(cublasLtCreate(&s->handle), "cublasLtCreate");
    s->workspace = Tensor::empty({static_cast<int64_t>(kWorkspaceBytes / 4)}, DType::Float32, Device::cuda(device));
    return s;
  });
}

// The largest power of two (at most 256) that divides the address: cuBLASLt's heuristic assumes
// 256-byte aligned operands unless told otherwise, and a view at an offset (q, k, v sliced from one
// tensor) is often less aligned.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

std::unique_ptr<ChosenGemm> choose_gemm(const GemmCall& c, const GemmPlan& plan, const uint32_t (&alignment)[3],
                                        cublasLtHandle_t handle) {
  auto chosen = std::make_unique<ChosenGemm>();
  static float placeholder_vector = 0.0f;  // the real pointer is set on every call
  describe(c, plan, &placeholder_vector, chosen->d);
  cublasLtMatmulPreference_t pref = nullptr;
  check_blas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignment[0],
                                       sizeof alignment[0]);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignment[1],
                                       sizeof alignment[1]);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignment[2],
                                       sizeof alignment[2]);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignment[2],
                                       sizeof alignment[2]);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(handle, chosen->d.op, chosen->d.a, chosen->d.b,
                                                                  chosen->d.c, chosen->d.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm for a bias-gradient epilogue: the caller plans the product without it (run_gemm).
  if (c.epilogue == GemmEpilogue::BGradB && (heuristic == CUBLAS_STATUS_NOT_SUPPORTED || found == 0)) return chosen;
  check_blas(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  TS_CHECK(found > 0, "matmul: cuBLASLt has no algorithm for ", c.str());
  chosen->algo = result.algo;
  chosen->found = true;
  return chosen;
}

// What decides the descriptors and the algorithm: the call without its offsets (they move the
// pointers only), the plan's dtype and math mode, and the three pointers' alignment.
GemmKey cache_key(GemmCall c, const GemmPlan& plan, const uint32_t (&alignment)[3]) {
  c.offset_a = c.offset_b = c.offset_c = 0;
  return {c, plan.dtype, plan.tf32, {alignment[0], alignment[1], alignment[2]}};
}

}  // namespace

bool run_gemm(const GemmPlan& plan, const GemmPointers& p, cudaStream_t stream, int device) {
  DeviceState& s = state_of(device);
  const size_t elem = dtype_size(plan.dtype);
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = plan.dtype == DType::Float64;
  for (const GemmCall& c : plan.calls) {
    const char* a = static_cast<const char*>(p.a) + c.offset_a * elem;
    const char* b = static_cast<const char*>(p.b) + c.offset_b * elem;
    char* out = static_cast<char*>(p.c) + c.offset_c * elem;
    const uint32_t alignment[3] = {alignment_of(a), alignment_of(b), alignment_of(out)};
    std::unique_ptr<ChosenGemm> uncached;
    ChosenGemm& g =
        s.cache.get(cache_key(c, plan, alignment), uncached, [&] { return choose_gemm(c, plan, alignment, s.handle); });
    // Only bias-gradient calls go unfound, and plans make them as their only call: nothing is queued.
    if (!g.found) return false;
    if (c.epilogue != GemmEpilogue::None) set_epilogue_vector(g.d.op, epilogue_vector(c, p));
    check_blas(cublasLtMatmul(s.handle, g.d.op, f64 ? static_cast<const void*>(&one_d) : &one_f, a, g.d.a, b, g.d.b,
                              f64 ? static_cast<const void*>(&zero_d) : &zero_f, out, g.d.c, out, g.d.c, &g.algo,
                              s.workspace.device_raw_data(), kWorkspaceBytes, stream),
               "cublasLtMatmul");
  }
  return true;
}

std::string check_cublaslt_descriptors(const GemmPlan& plan) {
  static float fake_vector = 0.0f;  // a descriptor only stores the address
  for (const GemmCall& c : plan.calls) {
    try {
      Descriptors d;
      describe(c, plan, &fake_vector, d);
    } catch (const Error& e) { return c.str() + ": " + e.what(); }
  }
  return "";
}

std::string cublaslt_handle_status() {
  cublasLtHandle_t handle = nullptr;
  const cublasStatus_t status = cublasLtCreate(&handle);
  if (status == CUBLAS_STATUS_SUCCESS) cublasLtDestroy(handle);
  return cublasGetStatusString(status);
}

}  // namespace tessera::cuda
