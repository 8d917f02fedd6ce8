// The one list of public ops. Every op a user calls on tensors appears here once, as
//   X(name, family, trace)
// and everything that needs an op's name or facts takes them from here through its typed id
// (OpId::name): the front end's error messages and its record for the tracer (ops/trace.h), the
// ONNX exporter's per-op lowering table (io/onnx/lowerings.h: a Lowered op without its lowering
// fails the link), the sample table (tests/op_samples/: a test fails naming every op without
// samples) and `tessera ops`. A misspelt id fails the build.
//
//   family  the sample file that tests it (tests/op_samples/<family>.cpp); kernel tables have
//           their own families (ops/kernels/registry.h), since one op may call several tables.
//   trace   what the op reports to an op tracer while a forward pass is traced:
//             Lowered   itself, and the ONNX exporter writes it;
//             Refused   itself, and the exporter refuses it with an error naming it (comparisons:
//                       no model's forward pass uses them);
//             Untraced  nothing itself: the ops it runs report themselves (mean is a sum and a
//                       product; an update of the optimizer never runs in a traced forward pass).
//           tests/test_op_samples.cpp runs every sample under a tracer and checks this column.
//
// Aliases report as the op they are: view, flatten, squeeze and unsqueeze as reshape; transpose and
// t as permute; narrow as slice. Creation functions (zeros, rand, arange, ...) take no tensor and
// are not ops in this sense: their kernels (fill, random) are covered by the ops that call them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>

#define TESSERA_OPS(X)                           \
  X(neg, "elementwise", Lowered)                 \
  X(exp, "elementwise", Lowered)                 \
  X(log, "elementwise", Lowered)                 \
  X(sqrt, "elementwise", Lowered)                \
  X(rsqrt, "elementwise", Lowered)               \
  X(abs, "elementwise", Lowered)                 \
  X(tanh, "elementwise", Lowered)                \
  X(erf, "elementwise", Lowered)                 \
  X(sin, "elementwise", Lowered)                 \
  X(cos, "elementwise", Lowered)                 \
  X(sigmoid, "elementwise", Lowered)             \
  X(silu, "elementwise", Lowered)                \
  X(relu, "elementwise", Lowered)                \
  X(gelu, "elementwise", Lowered)                \
  X(clamp, "elementwise", Lowered)               \
  X(clamp_min, "elementwise", Untraced)          \
  X(clamp_max, "elementwise", Untraced)          \
  X(add, "elementwise", Lowered)                 \
  X(sub, "elementwise", Lowered)                 \
  X(mul, "elementwise", Lowered)                 \
  X(div, "elementwise", Lowered)                 \
  X(pow, "elementwise", Lowered)                 \
  X(maximum, "elementwise", Lowered)             \
  X(minimum, "elementwise", Lowered)             \
  X(eq, "elementwise", Refused)                  \
  X(ne, "elementwise", Refused)                  \
  X(lt, "elementwise", Refused)                  \
  X(le, "elementwise", Refused)                  \
  X(gt, "elementwise", Refused)                  \
  X(ge, "elementwise", Refused)                  \
  X(where, "elementwise", Lowered)               \
  X(masked_fill, "elementwise", Untraced)        \
  X(dropout, "elementwise", Untraced)            \
  X(drop_path, "elementwise", Untraced)          \
  X(drop_path_scale, "elementwise", Untraced)    \
  X(drop_path_residual, "elementwise", Untraced) \
  X(sum, "reduce", Lowered)                      \
  X(mean, "reduce", Untraced)                    \
  X(amax, "reduce", Untraced)                    \
  X(var, "reduce", Untraced)                     \
  X(norm, "reduce", Untraced)                    \
  X(sum_to, "reduce", Untraced)                  \
  X(argmax, "reduce", Untraced)                  \
  X(softmax, "softmax", Lowered)                 \
  X(log_softmax, "softmax", Lowered)             \
  X(cross_entropy, "loss", Untraced)             \
  X(soft_cross_entropy, "loss", Untraced)        \
  X(matmul, "linalg", Lowered)                   \
  X(linear, "linalg", Lowered)                   \
  X(conv2d, "conv", Lowered)                     \
  X(conv1d, "conv", Untraced)                    \
  X(layer_norm, "normalization", Lowered)        \
  X(batch_norm, "normalization", Lowered)        \
  X(normalize, "normalization", Lowered)         \
  X(gather, "indexing", Untraced)                \
  X(index_select, "indexing", Untraced)          \
  X(cat, "indexing", Lowered)                    \
  X(stack, "indexing", Untraced)                 \
  X(unbind, "indexing", Untraced)                \
  X(split, "indexing", Untraced)                 \
  X(chunk, "indexing", Untraced)                 \
  X(split_with_sizes, "indexing", Untraced)      \
  X(pad, "indexing", Lowered)                    \
  X(embed, "indexing", Untraced)                 \
  X(cast_all, "indexing", Untraced)              \
  X(interpolate, "interpolate", Lowered)         \
  X(reshape, "views", Lowered)                   \
  X(permute, "views", Lowered)                   \
  X(slice, "views", Lowered)                     \
  X(select, "views", Lowered)                    \
  X(expand, "views", Lowered)                    \
  X(clone, "views", Lowered)                     \
  X(contiguous, "views", Untraced)               \
  X(to, "views", Lowered)                        \
  X(copy_, "views", Untraced)                    \
  X(fill_, "views", Untraced)                    \
  X(add_, "views", Untraced)                     \
  X(mul_, "views", Untraced)                     \
  X(layer_scale_residual, "fused", Lowered)      \
  X(linear_gelu, "fused", Lowered)               \
  X(xca_attention_map, "fused", Lowered)         \
  X(xca_attention, "fused", Lowered)             \
  X(factor_attention, "fused", Lowered)          \
  X(factor_attention_merge, "fused", Lowered)    \
  X(class_attention, "fused", Lowered)           \
  X(xnorm_matmul, "fused", Lowered)              \
  X(talking_heads_attention, "fused", Lowered)   \
  X(depthwise_conv2d_gelu, "fused", Lowered)     \
  X(adamw_update_, "optim", Untraced)            \
  X(sgd_update_, "optim", Untraced)              \
  X(sum_of_squares, "optim", Untraced)           \
  X(scale_, "optim", Untraced)                   \
  X(lerp_, "optim", Untraced)                    \
  X(unscale_, "optim", Untraced)

namespace tessera {

enum class OpId : uint16_t {
#define TS_OP_ID(name, family, trace) name,
  TESSERA_OPS(TS_OP_ID)
#undef TS_OP_ID
};

enum class OpTrace : uint8_t { Lowered, Refused, Untraced };

struct OpDecl {
  OpId id;
  const char* name;    // as the op's function is named: "xca_attention_map"
  const char* family;  // its sample file's family
  OpTrace trace;
};

namespace detail {
inline constexpr OpDecl kOpDecls[] = {
#define TS_OP_DECL(name, family, trace) {OpId::name, #name, family, OpTrace::trace},
    TESSERA_OPS(TS_OP_DECL)
#undef TS_OP_DECL
};
}  // namespace detail

inline constexpr size_t kOpCount = std::size(detail::kOpDecls);

// Every op, in the list's order (kOpDecls[i].id == OpId(i)).
constexpr std::span<const OpDecl> all_ops() { return detail::kOpDecls; }
constexpr const OpDecl& op_decl(OpId id) { return detail::kOpDecls[static_cast<size_t>(id)]; }
// The op's name, for messages ("xca_attention_map: expected ...") and records.
constexpr const char* op_name(OpId id) { return op_decl(id).name; }

}  // namespace tessera
