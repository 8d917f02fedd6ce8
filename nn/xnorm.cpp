#include "tessera/nn/xnorm.h"

#include "tessera/ops/autocast_operands.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

namespace {

// [B, n, h·dh] -> [B, h, n, dh]: channel c of a token belongs to head c / dh (head-major layout).
Tensor split_heads(const Tensor& t, int64_t heads) {
  return t.reshape({t.size(0), t.size(1), heads, t.size(2) / heads}).transpose(1, 2);
}

// [B, h, n, dh] -> [B, n, h·dh].
Tensor merge_heads(const Tensor& t) { return t.transpose(1, 2).reshape({t.size(0), t.size(2), t.size(1) * t.size(3)}); }

void check_heads(const char* op, int64_t dim, int64_t embed_dim, int64_t heads) {
  TS_CHECK(dim > 0 && embed_dim > 0 && heads > 0, op, ": dim, embed dim and num_heads must be positive, got ", dim,
           ", ", embed_dim, ", ", heads);
  TS_CHECK(embed_dim % heads == 0, op, ": embed dim E ", embed_dim, " is not divisible by num_heads ", heads);
}

}  // namespace

Tensor xnorm(const Tensor& x_in, const Tensor& gamma_in, int64_t dim, double eps) {
  TS_CHECK(x_in.defined() && gamma_in.defined(), "xnorm: input and gamma must be defined");
  const auto [x, gamma] = autocast_meet(x_in, gamma_in);
  TS_CHECK(is_floating(x.dtype()) && x.dtype() == gamma.dtype(), "xnorm: expected matching floating dtypes, got ",
           dtype_name(x.dtype()), " input and ", dtype_name(gamma.dtype()), " gamma");
  TS_CHECK(dim >= -x.dim() && dim < x.dim(), "xnorm: dim ", dim, " out of range for input ", x.shape());
  return gamma * normalize(x, dim, eps);
}

Tensor ufo_context(const Tensor& k, const Tensor& v, const Tensor& gamma) {
  TS_CHECK(k.defined() && v.defined(), "ufo_context: k and v must be defined");
  TS_CHECK(k.dim() == 4 && v.dim() == 4 && k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2),
           "ufo_context: expected k [B, h, N, dk] and v [B, h, N, dv], got ", k.shape(), " and ", v.shape());
  // Eq. 5: sum over the tokens first; Eq. 8: then each column over the key-channel axis.
  return xnorm(matmul(k.transpose(-2, -1), v), gamma, -2);
}

Tensor ufo_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gamma) {
  TS_CHECK(q.defined() && k.defined(), "ufo_attention: q and k must be defined");
  TS_CHECK(q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
           "ufo_attention: expected q [B, h, Nq, dk] and k [B, h, N, dk], got ", q.shape(), " and ", k.shape());
  // Eq. 3: XN_dim=filter(Q)·XN_dim=space(KᵀV), the queries' XNorm folded into the product:
  // [B, h, Nq, dv], a view of token-layout storage.
  return xnorm_matmul(q, ufo_context(k, v, gamma), gamma);
}

UFOAttention::UFOAttention(int64_t d, int64_t E, int64_t heads, bool qkv_bias, double proj_drop)
    : dim(d), embed_dim(E), num_heads(heads), proj_drop_(proj_drop) {
  check_heads("UFOAttention", d, E, heads);
  gamma = register_parameter("gamma", ones({heads, 1, 1}));
  qkv = register_module("qkv", std::make_shared<Linear>(d, 3 * E, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(E, d));
}

Tensor UFOAttention::forward(const Tensor& x) {
  ForwardScope scope(*this);
  TS_CHECK(x.defined() && x.dim() == 3 && x.size(2) == dim, "UFOAttention: expected tokens [B, N, ", dim, "], got ",
           x.defined() ? x.shape() : Shape{});
  const int64_t B = x.size(0), N = x.size(1), dh = embed_dim / num_heads;
  // [B, N, 3, h, dh] -> [3, B, h, N, dh]: the qkv output channels are [q | k | v], each head-major.
  const std::vector<Tensor> qkv_t =
      unbind(qkv->forward(x).reshape({B, N, 3, num_heads, dh}).permute({2, 0, 3, 1, 4}), 0);
  Tensor out = ufo_attention(qkv_t[0], qkv_t[1], qkv_t[2], gamma);
  if (scope.probing()) {  // Eq. 5/8's clusters, and out[n, j] = q̂_n · k̂_j (`tessera explain`)
    scope.probe("clusters", ufo_context(qkv_t[1], qkv_t[2], gamma));
    scope.probe("similarity", out);
  }
  return scope.output(dropout(proj->forward(merge_heads(out)), proj_drop_, is_training()));
}

UFOClassAttention::UFOClassAttention(int64_t d, int64_t E, int64_t heads, bool qkv_bias, double proj_drop)
    : dim(d), embed_dim(E), num_heads(heads), proj_drop_(proj_drop) {
  check_heads("UFOClassAttention", d, E, heads);
  gamma = register_parameter("gamma", ones({heads, 1, 1}));
  q = register_module("q", std::make_shared<Linear>(d, E, qkv_bias));
  k = register_module("k", std::make_shared<Linear>(d, E, qkv_bias));
  v = register_module("v", std::make_shared<Linear>(d, E, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(E, d));
}

Tensor UFOClassAttention::forward(const Tensor& tokens) {
  ForwardScope scope(*this);
  TS_CHECK(tokens.defined() && tokens.dim() == 3 && tokens.size(1) >= 1 && tokens.size(2) == dim,
           "UFOClassAttention: expected tokens [B, 1+N, ", dim, "], got ", tokens.defined() ? tokens.shape() : Shape{});
  Tensor qh = split_heads(q->forward(tokens.narrow(1, 0, 1)), num_heads);  // [B, h, 1, dh]
  Tensor kh = split_heads(k->forward(tokens), num_heads), vh = split_heads(v->forward(tokens), num_heads);
  Tensor out = ufo_attention(qh, kh, vh, gamma);
  if (scope.probing()) {  // as UFOAttention's, for the class token alone
    scope.probe("clusters", ufo_context(kh, vh, gamma));
    scope.probe("similarity", out);
  }
  return scope.output(dropout(proj->forward(merge_heads(out)), proj_drop_, is_training()));
}

}  // namespace tessera::nn
