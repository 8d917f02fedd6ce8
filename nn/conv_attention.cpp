#include "tessera/nn/conv_attention.h"

#include <cmath>

#include "tessera/core/levers.h"
#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

namespace {

// Checks tokens [B, 1+H·W, C] (a CLS token and an H x W grid) for `op`.
void check_tokens(const Tensor& x, int64_t H, int64_t W, int64_t C, const char* op) {
  TS_CHECK(x.defined() && x.dim() == 3, op, ": expected tokens [B, 1+H*W, C], got ", x.defined() ? x.shape() : Shape{});
  TS_CHECK(H > 0 && W > 0 && x.size(1) == 1 + H * W && x.size(2) == C, op, ": expected tokens [B, ", 1 + H * W, ", ", C,
           "] (a CLS token and a ", H, "x", W, " grid), got ", x.shape());
}

}  // namespace

ConvPosEnc::ConvPosEnc(int64_t dim, int64_t kernel) {
  TS_CHECK(dim > 0 && kernel > 0 && kernel % 2 == 1, "ConvPosEnc: expected a positive dim and an odd kernel, got dim ",
           dim, " kernel ", kernel);
  proj = register_module(
      "proj", std::make_shared<Conv2d>(dim, dim, std::array<int64_t, 2>{kernel, kernel}, std::array<int64_t, 2>{1, 1},
                                       std::array<int64_t, 2>{kernel / 2, kernel / 2}, dim));
}

Tensor ConvPosEnc::forward(const Tensor& x, int64_t H, int64_t W) {
  ForwardScope scope(*this);
  check_tokens(x, H, W, proj->weight.size(0), "ConvPosEnc");
  Tensor map = tokens_to_map(x.narrow(1, 1, H * W), H, W, "ConvPosEnc");
  return scope.output(cat({x.narrow(1, 0, 1), map_to_tokens(proj->forward(map) + map)}, 1));
}

ConvRelPosEnc::ConvRelPosEnc(int64_t head_dim_, int64_t num_heads_, std::vector<std::pair<int64_t, int64_t>> windows)
    : head_dim(head_dim_), num_heads(num_heads_) {
  TS_CHECK(head_dim > 0 && num_heads > 0, "ConvRelPosEnc: head_dim and num_heads must be positive, got ", head_dim,
           " and ", num_heads);
  conv_list = register_module("conv_list", std::make_shared<ModuleList<Conv2d>>());
  int64_t heads = 0;
  for (const auto& [kernel, window_heads] : windows) {
    TS_CHECK(kernel > 0 && kernel % 2 == 1 && window_heads > 0, "ConvRelPosEnc: window ", kernel, " with ",
             window_heads, " heads: expected an odd kernel and a positive head count");
    const int64_t channels = window_heads * head_dim;
    conv_list->push_back(std::make_shared<Conv2d>(channels, channels, std::array<int64_t, 2>{kernel, kernel},
                                                  std::array<int64_t, 2>{1, 1},
                                                  std::array<int64_t, 2>{kernel / 2, kernel / 2}, channels));
    channel_splits_.push_back(channels);
    heads += window_heads;
  }
  TS_CHECK(heads == num_heads, "ConvRelPosEnc: the windows cover ", heads, " heads, expected num_heads = ", num_heads);
}

namespace {

void check_head_tokens(const Tensor& t, const char* name, int64_t heads, int64_t head_dim, int64_t H, int64_t W,
                       const char* op) {
  TS_CHECK(t.defined() && t.dim() == 4 && t.size(1) == heads && t.size(2) == 1 + H * W && t.size(3) == head_dim, op,
           ": expected ", name, " [B, ", heads, ", ", 1 + H * W, ", ", head_dim, "] for a ", H, "x", W, " grid, got ",
           t.defined() ? t.shape() : Shape{});
}

}  // namespace

Tensor ConvRelPosEnc::convolve_values(const Tensor& v, int64_t H, int64_t W) {
  check_head_tokens(v, "v", num_heads, head_dim, H, W, "ConvRelPosEnc");
  const int64_t B = v.size(0), N = H * W;
  // Image tokens of v as a map whose channel head·C_h + c is channel c of head h.
  Tensor v_img = v.narrow(2, 1, N).transpose(-1, -2).reshape({B, num_heads * head_dim, H, W});
  std::vector<Tensor> pieces = split_with_sizes(v_img, channel_splits_, 1);
  for (size_t i = 0; i < pieces.size(); ++i) pieces[i] = (*conv_list)[i]->forward(pieces[i]);
  return cat(pieces, 1).reshape({B, num_heads, head_dim, N}).transpose(-1, -2);
}

Tensor ConvRelPosEnc::forward(const Tensor& q, const Tensor& v, int64_t H, int64_t W) {
  ForwardScope scope(*this);
  check_head_tokens(q, "q", num_heads, head_dim, H, W, "ConvRelPosEnc");
  TS_CHECK(v.defined() && v.shape() == q.shape(), "ConvRelPosEnc: expected q and v of one shape, got ", q.shape(),
           " and ", v.defined() ? v.shape() : Shape{});
  Tensor ev = q.narrow(2, 1, H * W) * convolve_values(v, H, W);  // Eq. 10, Hadamard product with the unscaled Q
  return scope.output(pad(ev, {0, 0, 1, 0}));                    // Eq. 11: a zero row for the CLS token
}

FactorAttnConvRelPosEnc::FactorAttnConvRelPosEnc(int64_t dim, int64_t heads, std::shared_ptr<ConvRelPosEnc> crpe_,
                                                 bool qkv_bias, double proj_drop)
    : num_heads(heads), proj_drop_(proj_drop) {
  TS_CHECK(heads > 0 && dim % heads == 0, "FactorAttnConvRelPosEnc: dim ", dim, " is not divisible by num_heads ",
           heads);
  TS_CHECK(crpe_ != nullptr, "FactorAttnConvRelPosEnc: a ConvRelPosEnc is required");
  TS_CHECK(crpe_->num_heads == heads && crpe_->head_dim == dim / heads,
           "FactorAttnConvRelPosEnc: the CRPE is built for ", crpe_->num_heads, " heads of ", crpe_->head_dim,
           " channels, expected ", heads, " heads of ", dim / heads);
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim));
  crpe = register_module("crpe", std::move(crpe_));
}

Tensor FactorAttnConvRelPosEnc::forward(const Tensor& x, int64_t H, int64_t W) {
  ForwardScope scope(*this);
  const int64_t C = proj->weight.size(0), dh = C / num_heads;
  check_tokens(x, H, W, C, "FactorAttnConvRelPosEnc");
  const int64_t B = x.size(0), N = x.size(1);
  const Tensor projected = qkv->forward(x);
  const double scale = std::pow(static_cast<double>(dh), -0.5);
  Tensor out;
  if (levers().fused_factor_attention && !scope.probing()) {
    // Eq. 3 and 12 as one op from the projection: softmax(K) over the tokens, the d×d map
    // softmax(K)ᵀV, Q/√C_h times it plus the CRPE term, in token layout (ops/factor_attention.h).
    // A probe gets the terms apart from the composed ops below. The CRPE's V is a view of the
    // projection's last third, so in backward its gradient is added into that third of the fused
    // op's qkv gradient in place (autograd/node.h gradient_sink), not as a whole [B, N, 3C] sum.
    const Tensor v = projected.narrow(2, 2 * C, C).view({B, N, num_heads, dh}).transpose(1, 2);
    out = factor_attention(projected, crpe->convolve_values(v, H, W), num_heads, scale);
  } else {
    // [B, N, 3, h, C_h] -> [3, B, h, N, C_h]
    const std::vector<Tensor> qkv_t = unbind(projected.reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 1, 4}), 0);
    const Tensor &q = qkv_t[0], &k = qkv_t[1], &v = qkv_t[2];
    const Tensor conv_v = crpe->convolve_values(v, H, W);
    // Eq. 3: softmax(K) over the tokens, per channel; then the C_h x C_h map softmax(K)ᵀV first.
    Tensor kv = matmul(softmax(k, 2).transpose(-1, -2), v);
    // Eq. 12: Q/√C_h·(softmax(K)ᵀV) + ÊV with ÊV = pad(Q_img ∘ DWConv(P, V_img)) (Eq. 10-11, as
    // ConvRelPosEnc::forward), merged back to [B, N, C] in one pass.
    Tensor factor = matmul(q, kv);
    if (scope.probing()) {  // the two terms of Eq. 12 apart, for `tessera explain`
      scope.probe("context", kv);
      scope.probe("factor_term", factor * scale);
      scope.probe("crpe_term", q.narrow(2, 1, N - 1) * conv_v);
    }
    out = factor_attention_merge(factor, q, conv_v, scale);
  }
  return scope.output(dropout(proj->forward(out), proj_drop_, is_training()));
}

}  // namespace tessera::nn
