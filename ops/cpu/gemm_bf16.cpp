// bfloat16 GEMMs on the CPU (ops/cpu/gemm.h gemm_bf16_batched), on two paths:
//
// - native (cpu_bf16_native(): AVX-512 BF16 or AMX, TESSERA_ONEDNN builds), for products where it
//   pays (native_pays() below): one oneDNN matmul primitive on bfloat16 memory descriptors (its
//   brgemm kernels multiply bfloat16 pairs into float32 sums with VDPBF16PS or AMX tiles; a strided
//   or column-major operand is a stride of the descriptor, never a copy), the destination bfloat16
//   or float32, beta·C as a sum post-op, the bias as the primitive's bias and GELU as an eltwise
//   post-op (oneDNN's own erf and tanh approximations). oneDNN's fpmath mode
//   would not do: on x86 without AMX it has no effect, so the descriptors themselves are bfloat16.
//   Primitives are made once per shape and kept (creating one costs tens of microseconds, running a
//   small one less).
// - portable (a CPU without bfloat16 instructions, a build without oneDNN, and tiny products,
//   native_pays() below): the operands converted to float32 (exactly:
//   a bfloat16 is a float32 with a shorter mantissa) and gemm<float>; the products are the same,
//   only the order of their sums differs.
#include <omp.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#ifdef TESSERA_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "tessera/core/cpu_features.h"
#include "tessera/core/error.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/cpu/gemm.h"
#include "tessera/ops/cpu/gemm_split.h"
#include "tessera/ops/cpu/storage.h"
#include "tessera/ops/cpu/unary_spans.h"

namespace tessera::cpu {

namespace {

// The stride between the batch's matrices (0: one matrix shared by all), when it is one stride.
template <class T>
std::optional<int64_t> uniform_stride(const BatchPtr<T>& p, int64_t batch) {
  if (!p.offsets) return p.stride;
  if (batch == 1) return int64_t{0};
  const int64_t step = p.offsets[1] - p.offsets[0];
  for (int64_t i = 2; i < batch; ++i)
    if (p.offsets[i] - p.offsets[i - 1] != step) return std::nullopt;
  return step;
}

// ---- portable ----------------------------------------------------------------------------------

// op(X)'s stored matrix (rows × cols with row stride ld) as dense float32 (row stride cols).
void widen(const BFloat16* x, int64_t rows, int64_t cols, int64_t ld, float* out) {
  bf16_to_float(x, ld, out, cols, rows, cols);
}

// The epilogue on `rows` rows of n float32 values (row stride ld), C unread where beta is 0.
void apply_epilogue(const GemmEpilogue& e, float* c, int64_t rows, int64_t n, int64_t ld) {
  if (!e.any()) return;
  std::vector<float> bias;
  if (e.bias_bf16) {
    bias.resize(static_cast<size_t>(n));
    bf16_to_float(e.bias_bf16, bias.data(), n);
  }
  const float* b = e.bias_bf16 ? bias.data() : e.bias_f32;
  const UnaryArgs gelu{e.gelu == GemmEpilogue::Gelu::Tanh ? UnaryOp::GeluTanh : UnaryOp::GeluErf};
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ld;
    if (b)
      for (int64_t j = 0; j < n; ++j) row[j] += b[j];
    if (e.gelu != GemmEpilogue::Gelu::None) unary_span<float>(gelu, row, row, n);
  }
}

// Uninitialised float32 scratch (a std::vector would first write zeros over all of it).
std::unique_ptr<float[]> scratch(int64_t n) { return std::unique_ptr<float[]>(new float[static_cast<size_t>(n)]); }

// op(B) converted once; op(A)'s and C's rows a panel at a time, the panels in parallel (each GEMM
// then serial), so that the conversions, which cost as much as the product on wide activations, are
// shared by the threads and stay in cache. Inside a parallel region (a batch's entries per thread),
// serially.
template <class C>
void portable_one(const GemmDesc& d, const BFloat16* a, const BFloat16* b, float beta, C* c,
                  const GemmEpilogue& epilogue) {
  const int64_t b_rows = d.trans_b ? d.n : d.k, b_cols = d.trans_b ? d.k : d.n;
  const std::unique_ptr<float[]> fb = scratch(b_rows * b_cols);
  widen(b, b_rows, b_cols, d.ldb, fb.get());
  constexpr int64_t kPanelRows = 64;
  const int64_t threads = in_parallel_region() ? 1 : get_num_threads();
  const int64_t panels = std::clamp<int64_t>(d.m / kPanelRows, 1, 4 * threads);
  parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = d.m * p / panels, rows = d.m * (p + 1) / panels - r0;
      GemmDesc pd = d;
      pd.m = rows;
      pd.ldb = b_cols;
      // op(A)'s rows r0.. : A's rows, or (transposed) its columns.
      const std::unique_ptr<float[]> fa = scratch(rows * d.k);
      if (d.trans_a) widen(a + r0, d.k, rows, d.lda, fa.get());
      else widen(a + r0 * d.lda, rows, d.k, d.lda, fa.get());
      pd.lda = d.trans_a ? rows : d.k;
      // C's rows in float32: C itself, or (bfloat16) a float32 copy, read where beta needs it.
      std::unique_ptr<float[]> fc;
      float* cp = nullptr;
      if constexpr (std::is_same_v<C, float>) {
        cp = c + r0 * d.ldc;
      } else {
        fc = scratch(rows * d.n);
        if (beta != 0.0f) widen(c + r0 * d.ldc, rows, d.n, d.ldc, fc.get());
        cp = fc.get();
        pd.ldc = d.n;
      }
      gemm<float>(pd, 1.0f, fa.get(), fb.get(), beta, cp);
      apply_epilogue(epilogue, cp, rows, d.n, pd.ldc);
      if constexpr (!std::is_same_v<C, float>) float_to_bf16(cp, d.n, c + r0 * d.ldc, d.ldc, rows, d.n);
    }
  });
}

template <class C>
void portable(const GemmDesc& d, int64_t batch, BatchPtr<const BFloat16> a, BatchPtr<const BFloat16> b, float beta,
              BatchPtr<C> c, const GemmEpilogue& epilogue) {
  const int64_t threads = get_num_threads();
  // Whole entries per thread when the batch balances the threads (each GEMM then serial inside the
  // region), else one entry at a time with every thread.
  const bool per_thread = batch >= threads && (batch % threads == 0 || batch >= 4 * threads);
  parallel_for(0, batch, per_thread ? 1 : batch, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) portable_one<C>(d, a[i], b[i], beta, c[i], epilogue);
  });
}

// ---- native (oneDNN) ---------------------------------------------------------------------------

#ifdef TESSERA_ONEDNN
// Where oneDNN's bfloat16 kernels beat converting to float32 and running gemm<float>: products of at
// least 2^15 multiply-adds (below, a primitive's call costs more: the 16×16×196 products of XCA's
// maps). Thin ones (XCiT's first stem convolutions' im2col products, 16×27×9696) run at a fraction
// of the brgemm kernels' peak, but converting their operands costs more still (measured on Zen 5).
bool native_pays(const GemmDesc& d) { return d.m * d.n * d.k >= (int64_t{1} << 15); }

struct PrimitiveKey {
  int64_t m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
  bool trans_a, trans_b, c_bf16, sum;
  int bias;  // 0 none, 1 bfloat16, 2 float32
  GemmEpilogue::Gelu gelu;
  bool operator==(const PrimitiveKey&) const = default;
};

struct PrimitiveKeyHash {
  size_t operator()(const PrimitiveKey& k) const {
    size_t h = 0;
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.batch, k.stride_a, k.stride_b, k.stride_c,
                      int64_t{k.trans_a} | int64_t{k.trans_b} << 1 | int64_t{k.c_bf16} << 2 | int64_t{k.sum} << 3 |
                          int64_t{k.bias} << 4 | static_cast<int64_t>(k.gelu) << 6})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// op(X) of a batch: dims {batch, rows, cols} with the stored matrix's strides; a shared matrix
// (stride 0) is oneDNN's broadcast batch dim of 1.
dnnl::memory::desc operand_desc(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld, bool trans,
                                dnnl::memory::data_type type) {
  const dnnl::memory::dims strides = trans ? dnnl::memory::dims{stride, 1, ld} : dnnl::memory::dims{stride, ld, 1};
  if (batch == 1 || stride == 0)
    return dnnl::memory::desc({1, rows, cols}, type, {rows * cols, strides[1], strides[2]});
  return dnnl::memory::desc({batch, rows, cols}, type, strides);
}

// A primitive and the descriptors its memory objects are made with.
struct Primitive {
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, c, bias;
};

Primitive make_primitive(const PrimitiveKey& key) {
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a = operand_desc(key.batch, key.stride_a, key.m, key.k, key.lda, key.trans_a, dt::bf16);
  const dnnl::memory::desc b = operand_desc(key.batch, key.stride_b, key.k, key.n, key.ldb, key.trans_b, dt::bf16);
  const dnnl::memory::desc c({key.batch, key.m, key.n}, key.c_bf16 ? dt::bf16 : dt::f32,
                             {key.batch == 1 ? key.m * key.ldc : key.stride_c, key.ldc, 1});
  const dnnl::memory::desc bias({1, 1, key.n}, key.bias == 2 ? dt::f32 : dt::bf16, {key.n, key.n, 1});
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  if (key.sum) ops.append_sum(1.0f);
  if (key.gelu != GemmEpilogue::Gelu::None)
    ops.append_eltwise(
        1.0f,
        key.gelu == GemmEpilogue::Gelu::Erf ? dnnl::algorithm::eltwise_gelu_erf : dnnl::algorithm::eltwise_gelu_tanh,
        0.0f, 0.0f);
  if (ops.len() > 0) attr.set_post_ops(ops);
  const dnnl::matmul::desc desc = key.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
  return {dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, cpu_engine())), a, b, c, bias};
}

// This thread's primitives (the data loader's threads, which run the models' transforms, keep their
// own): at most kKept, the oldest dropped first when a new shape comes.
constexpr size_t kKept = 512;

Primitive& primitive_for(const PrimitiveKey& key) {
  thread_local std::unordered_map<PrimitiveKey, Primitive, PrimitiveKeyHash> kept;
  thread_local std::vector<PrimitiveKey> order;
  if (auto it = kept.find(key); it != kept.end()) return it->second;
  if (kept.size() >= kKept) {
    kept.erase(order.front());
    order.erase(order.begin());
  }
  order.push_back(key);
  return kept.emplace(key, make_primitive(key)).first->second;
}

template <class C>
void native_call(const GemmDesc& d, int64_t batch, const BFloat16* a, int64_t stride_a, const BFloat16* b,
                 int64_t stride_b, float beta, C* c, int64_t stride_c, const GemmEpilogue& epilogue) {
  const PrimitiveKey key{d.m,
                         d.n,
                         d.k,
                         d.lda,
                         d.ldb,
                         d.ldc,
                         batch,
                         stride_a,
                         stride_b,
                         stride_c,
                         d.trans_a,
                         d.trans_b,
                         !std::is_same_v<C, float>,
                         beta != 0.0f,
                         epilogue.bias_bf16  ? 1
                         : epilogue.bias_f32 ? 2
                                             : 0,
                         epilogue.gelu};
  thread_local dnnl::stream stream(cpu_engine());
  // Single-threaded (the pool's threads share the product out; oneDNN sizes its OpenMP team by
  // omp_get_max_threads() when a primitive is made and run).
  const int previous = omp_get_max_threads();
  if (previous != 1) omp_set_num_threads(1);
  try {
    Primitive& p = primitive_for(key);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(p.a, cpu_engine(), const_cast<BFloat16*>(a))},
        {DNNL_ARG_WEIGHTS, dnnl::memory(p.b, cpu_engine(), const_cast<BFloat16*>(b))},
        {DNNL_ARG_DST, dnnl::memory(p.c, cpu_engine(), c)}};
    if (key.bias == 1)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, cpu_engine(), const_cast<BFloat16*>(epilogue.bias_bf16)));
    if (key.bias == 2)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, cpu_engine(), const_cast<float*>(epilogue.bias_f32)));
    p.matmul.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    if (previous != 1) omp_set_num_threads(previous);
    throw Error(detail::concat("GEMM: oneDNN's bfloat16 matmul failed (", e.what(), ") for ", batch, " [", d.m, ", ",
                               d.k, "] x [", d.k, ", ", d.n, "] product(s)"));
  }
  if (previous != 1) omp_set_num_threads(previous);
}

// Single-threaded primitives on the pool's units (gemm_split.h): groups of whole entries where the
// batch is one stride (one primitive per group), else each entry alone, cut into row panels (a
// panel's bias is the whole bias: it indexes columns).
template <class C>
void native(const GemmDesc& d, int64_t batch, BatchPtr<const BFloat16> a, BatchPtr<const BFloat16> b, float beta,
            BatchPtr<C> c, const GemmEpilogue& epilogue) {
  const GemmSplit split(d, batch, true);
  const std::optional<int64_t> sa = uniform_stride(a, batch), sb = uniform_stride(b, batch),
                               sc = uniform_stride(c, batch);
  if (split.panels == 1 && sa && sb && sc && (batch == 1 || *sc != 0)) {
    parallel_for(0, batch, 1, [&](int64_t i0, int64_t i1) {
      native_call<C>(d, i1 - i0, a[i0], *sa, b[i0], *sb, beta, c[i0], *sc, epilogue);
    });
    return;
  }
  parallel_for(0, batch * split.panels, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i = u / split.panels;
      const GemmSplit::Panel p = split.panel(d, u % split.panels);
      native_call<C>(p.d, 1, a[i] + p.a, 0, b[i] + p.b, 0, beta, c[i] + p.c, 0, epilogue);
    }
  });
}
#endif

}  // namespace

template <class C>
void gemm_bf16_batched(const GemmDesc& d, int64_t batch, BatchPtr<const BFloat16> a, BatchPtr<const BFloat16> b,
                       float beta, BatchPtr<C> c, const GemmEpilogue& epilogue) {
  if (batch <= 0 || d.m <= 0 || d.n <= 0) return;
  TS_CHECK(beta == 0.0f || (beta == 1.0f && !epilogue.any()),
           "GEMM: the bfloat16 path takes beta 0 (with any epilogue) or 1 (with none), got ", beta);
  if (d.k == 0) {  // no products: C = epilogue(beta·C)
    for (int64_t i = 0; i < batch; ++i) portable_one<C>(d, a[i], b[i], beta, c[i], epilogue);
    return;
  }
#ifdef TESSERA_ONEDNN
  if (cpu_bf16_native() && native_pays(d)) return native<C>(d, batch, a, b, beta, c, epilogue);
#endif
  portable<C>(d, batch, a, b, beta, c, epilogue);
}

template void gemm_bf16_batched<float>(const GemmDesc&, int64_t, BatchPtr<const BFloat16>, BatchPtr<const BFloat16>,
                                       float, BatchPtr<float>, const GemmEpilogue&);
template void gemm_bf16_batched<BFloat16>(const GemmDesc&, int64_t, BatchPtr<const BFloat16>, BatchPtr<const BFloat16>,
                                          float, BatchPtr<BFloat16>, const GemmEpilogue&);

}  // namespace tessera::cpu
