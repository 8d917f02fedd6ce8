// Linear attention with a kernel feature map (Katharopoulos et al. 2020, "Transformers are RNNs",
// Eq. 4-6), a new attention variant defined outside Tessera. Softmax attention normalises each
// query's row of exp(q·k) scores; here a positive feature map φ replaces the exponential, so the
// sums over keys factor out and are shared by all queries:
//
//   out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / (φ(q_i)ᵀ Σ_j φ(k_j)),   φ(x) = elu(x) + 1   (Eq. 6, 7)
//
// Per head the bracket is a dh x dh matrix, so the cost is O(N·dh²): linear in the number of tokens
// N, like XCiT's cross-covariance attention, but normalised per query rather than by L2 norms and a
// temperature.
#pragma once
#include <memory>

#include <tessera/nn/layers.h>

namespace custom {

// φ(x) = elu(x) + 1 = relu(x) + exp(min(x, 0)): positive, so every normaliser is > 0, and written
// with existing ops, so autograd differentiates it with no code of ours.
tessera::Tensor elu_plus_one(const tessera::Tensor& x);

class LinearAttention : public tessera::nn::Module {
 public:
  LinearAttention(int64_t dim, int64_t num_heads);
  tessera::Tensor forward(const tessera::Tensor& x) override;  // tokens [B, N, d] -> [B, N, d]
  std::string type_name() const override { return "LinearAttention"; }

  std::shared_ptr<tessera::nn::Linear> qkv, proj;  // timm's names: one q/k/v projection, one output
  int64_t num_heads;
};

// Registers LinearAttention as the token mixer "linear_attention" of model files
// (tessera/models/token_mixers.h): a block's `attn: linear_attention` in any file builds it, with
// the block's embed_dim and num_heads (linear_xca_hybrid.yaml mixes it with XCiT's XCA blocks).
void register_linear_attention_mixer();

}  // namespace custom
