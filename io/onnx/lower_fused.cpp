// ONNX lowerings of the fused ops (io/onnx/lowerings.h): each is written as the composition it
// fuses, so any runtime reads it.
#include "tessera/io/onnx/lowerings.h"
#include "tessera/ops/creation.h"

namespace tessera::onnx_export {

void lower_linear_gelu(OnnxGraph& g, const TracedOp& op) {
  g.output(op, gelu(g, linear(g, op), op.arg<int64_t>("tanh") != 0));
}

void lower_depthwise_conv2d_gelu(OnnxGraph& g, const TracedOp& op) { g.output(op, gelu(g, conv(g, op), false)); }

// x + gamma·f (stochastic depth's sample scale is absent in eval mode).
void lower_layer_scale_residual(OnnxGraph& g, const TracedOp& op) {
  TS_CHECK(!op.inputs[3].defined(), "export: stochastic depth's sample scale (the model is in eval mode)");
  g.output(op, g.apply("Add", {g.input(op.inputs[0]), g.apply("Mul", {g.input(op.inputs[2]), g.input(op.inputs[1])})}));
}

namespace {

// softmax(temperature · q̂·k̂ᵀ) of q, k [B, h, d, N], q̂, k̂ normalised over the tokens (XCiT Eq. 2).
std::string xca_map(OnnxGraph& g, const std::string& q, const std::string& k, const std::string& temperature,
                    double eps) {
  const std::string logits = g.apply(
      "Mul",
      {g.apply("MatMul", {normalized(g, q, -1, eps), last_two_swapped(g, normalized(g, k, -1, eps), 4)}), temperature});
  return g.apply("Softmax", {logits}, {{"axis", int64_t{-1}}});
}

}  // namespace

void lower_xca_attention_map(OnnxGraph& g, const TracedOp& op) {
  g.output(op, xca_map(g, g.input(op.inputs[0]), g.input(op.inputs[1]), g.input(op.inputs[2]), op.arg<double>("eps")));
}

namespace {

// The heads of a qkv projection [B, N, 3·h·d] (op.inputs[0], h = the op's "heads"): its view
// [B, N, 3, h, d] transposed by perm (q, k, v first), and a part p of that (q, k or v).
std::string qkv_heads(OnnxGraph& g, const TracedOp& op, const std::vector<int64_t>& perm, int64_t batch) {
  const Shape& qkv = op.inputs[0].shape();
  const int64_t h = op.arg<int64_t>("heads"), d = qkv[2] / (3 * h);
  const std::string split =
      g.apply("Reshape", {g.input(op.inputs[0]), g.reshape_target({qkv[0], qkv[1], 3, h, d}, batch)});
  return g.apply("Transpose", {split}, {{"perm", perm}});
}
std::string qkv_part(OnnxGraph& g, const std::string& heads, int64_t p) {
  return g.apply("Gather", {heads, g.constant(from_vector(std::vector<int64_t>{p}, {}))}, {{"axis", int64_t{0}}});
}

}  // namespace

// XCA from its qkv projection [B, N, 3·h·d] to the tokens [B, N, h·d]: the heads as [B, h, d, N],
// the map, map·v, and back to token layout (nn/xca.cpp's composed path).
void lower_xca_attention(OnnxGraph& g, const TracedOp& op) {
  const int64_t batch = g.batch_of(op) >= 0 ? 0 : -1;
  const std::string parts = qkv_heads(g, op, {2, 0, 3, 4, 1}, batch);
  const std::string map =
      xca_map(g, qkv_part(g, parts, 0), qkv_part(g, parts, 1), g.input(op.inputs[1]), op.arg<double>("eps"));
  const std::string heads = g.apply("MatMul", {map, qkv_part(g, parts, 2)});  // [B, h, d, N]
  const std::string tokens = g.apply("Transpose", {heads}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  g.output(op, g.apply("Reshape", {tokens, g.reshape_target(op.outputs[0].shape(), batch)}), batch);
}

// softmax(scale·q·kᵀ)·v (CaiT's class attention).
void lower_class_attention(OnnxGraph& g, const TracedOp& op) {
  const std::string scores =
      g.apply("Mul", {g.apply("MatMul", {g.input(op.inputs[0]), last_two_swapped(g, g.input(op.inputs[1]), 4)}),
                      g.scalar(op.arg<double>("scale"))});
  g.output(op, g.apply("MatMul", {g.apply("Softmax", {scores}, {{"axis", int64_t{-1}}}), g.input(op.inputs[2])}));
}

// (gamma · normalize(q, -1)) · ctx (UFO-ViT's XNorm of the queries).
void lower_xnorm_matmul(OnnxGraph& g, const TracedOp& op) {
  const std::string q = normalized(g, g.input(op.inputs[0]), -1, op.arg<double>("eps"));
  g.output(op, g.apply("MatMul", {g.apply("Mul", {q, g.input(op.inputs[2])}), g.input(op.inputs[1])}));
}

namespace {

// scale·m + pad(q_img ⊙ cv) for m, q [B, h, N, d] and cv [B, h, N−1, d], merged back to the op's
// token-layout output (Eq. 12 with Eq. 10-11's ÊV).
std::string factor_merge(OnnxGraph& g, const TracedOp& op, const std::string& m, const std::string& q,
                         const std::string& cv, int64_t N, int64_t batch) {
  const std::string q_img = g.apply("Slice", {q, g.ints({1}), g.ints({N}), g.ints({2})});
  const std::string ev = g.apply("Mul", {q_img, cv});
  const std::string padded = g.apply("Pad", {ev, g.ints({0, 0, 1, 0, 0, 0, 0, 0}), g.scalar(0.0)});
  const std::string sum = g.apply("Add", {g.apply("Mul", {m, g.scalar(op.arg<double>("scale"))}), padded});
  const std::string tokens = g.apply("Transpose", {sum}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  return g.apply("Reshape", {tokens, g.reshape_target(op.outputs[0].shape(), batch)});
}

}  // namespace

// y[b, n, h·d + c] = scale·m[b, h, n, c] + (n ≥ 1 ? q[b, h, n, c]·cv[b, h, n−1, c] : 0) (CoaT's
// factorised attention plus its convolutional relative position encoding).
void lower_factor_attention_merge(OnnxGraph& g, const TracedOp& op) {
  const int64_t batch = g.batch_of(op) >= 0 ? 0 : -1;
  g.output(op,
           factor_merge(g, op, g.input(op.inputs[0]), g.input(op.inputs[1]), g.input(op.inputs[2]),
                        op.inputs[0].size(2), batch),
           batch);
}

// CoaT's factorised attention with CRPE from its qkv projection [B, N, 3·h·d] and cv (nn/conv_attention.cpp's
// composed path): the heads [B, h, N, d], softmax of k over the tokens (Eq. 3), softmax(k)ᵀ·v, q·that,
// then factor_attention_merge's merge.
void lower_factor_attention(OnnxGraph& g, const TracedOp& op) {
  const int64_t batch = g.batch_of(op) >= 0 ? 0 : -1;
  const std::string parts = qkv_heads(g, op, {2, 0, 3, 1, 4}, batch), q = qkv_part(g, parts, 0);
  const std::string k = g.apply("Softmax", {qkv_part(g, parts, 1)}, {{"axis", int64_t{2}}});
  const std::string context = g.apply("MatMul", {last_two_swapped(g, k, 4), qkv_part(g, parts, 2)});
  g.output(op,
           factor_merge(g, op, g.apply("MatMul", {q, context}), q, g.input(op.inputs[1]), op.inputs[0].size(1), batch),
           batch);
}

// Talking-heads attention (CaiT §4.3) as timm writes it: q, k, v sliced from qkv [B, N, 3·C] into
// heads [B, h, N, dh]; the scores' heads moved last for each mixing (a MatMul by wᵀ and the bias),
// softmax over the keys, then A·v merged back to tokens [B, N, C].
void lower_talking_heads_attention(OnnxGraph& g, const TracedOp& op) {
  const Tensor& qkv = op.inputs[0];
  const int64_t h = op.arg<int64_t>("num_heads"), B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  const int64_t batch = g.batch_of(op) >= 0 ? 0 : -1;
  const std::string heads_shape = g.reshape_target({B, N, h, C / h}, batch);
  auto part = [&](int64_t s, std::vector<int64_t> perm) {
    const std::string slice = g.apply("Slice", {g.input(qkv), g.ints({s * C}), g.ints({(s + 1) * C}), g.ints({2})});
    return g.apply("Transpose", {g.apply("Reshape", {slice, heads_shape})}, {{"perm", std::move(perm)}});
  };
  // maps [B, N, N, h] ↦ maps·wᵀ + b, over the heads.
  auto mix = [&](const std::string& maps, const Tensor& w, const Tensor& bias) {
    std::string mixed =
        g.apply("MatMul", {maps, g.apply("Transpose", {g.input(w)}, {{"perm", std::vector<int64_t>{1, 0}}})});
    return bias.defined() ? g.apply("Add", {mixed, g.input(bias)}) : mixed;
  };
  const std::string scores = g.apply(
      "Mul", {g.apply("MatMul", {part(0, {0, 2, 1, 3}), part(1, {0, 2, 3, 1})}), g.scalar(op.arg<double>("scale"))});
  const std::string heads_last = g.apply("Transpose", {scores}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  const std::string probs = g.apply("Softmax", {mix(heads_last, op.inputs[1], op.inputs[2])}, {{"axis", int64_t{2}}});
  const std::string attn =
      g.apply("Transpose", {mix(probs, op.inputs[3], op.inputs[4])}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  const std::string merged = g.apply("Transpose", {g.apply("MatMul", {attn, part(2, {0, 2, 1, 3})})},
                                     {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  g.output(op, g.apply("Reshape", {merged, g.reshape_target(op.outputs[0].shape(), batch)}), batch);
}

}  // namespace tessera::onnx_export
