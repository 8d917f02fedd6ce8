// The equations `tessera explain` cites, as the papers in shared/papers number them; see
// tools/cli/explain_papers.h.
#include "tools/cli/explain_papers.h"

#include <algorithm>
#include <map>

namespace tessera::cli {

namespace {

template <class T>
const T& find_or(const std::map<std::string, T>& table, const std::string& key, const T& none) {
  const auto it = table.find(key);
  return it == table.end() ? none : it->second;
}

// A function rather than a namespace-scope object (strings: built at static initialisation, in an
// order across translation units that nothing fixes).
Reading class_attention_reading() {
  return {"eq-class-attention", "Class attention (CaiT Eq. 5-9, §3; XCiT §3.3 uses it too)",
          "Q = W_q x_class + b_q,   K = W_k z + b_k,   V = W_v z + b_v,   z = [x_class, x_patches]\n"
          "A = Softmax(Q Kᵀ / √(d/h))\n"
          "out_CA = W_o A V + b_o   (added to x_class; the patches pass unchanged)",
          "nn/class_attention.cpp, ops/class_attention.h"};
}

}  // namespace

std::vector<Reading> reading_list(const std::vector<std::string>& families) {
  static const std::map<std::string, std::vector<Reading>> lists = {
      {"xcit",
       {{"eq-xca", "Cross-covariance attention (XCiT Eq. 1, §3.2)",
         "XC-Attention(Q, K, V) = V · A_XC(K, Q),   A_XC(K, Q) = Softmax(K̂ᵀ Q̂ / τ)\n"
         "Q̂, K̂: Q and K with each column (length N, one feature over all tokens) scaled to unit norm;\n"
         "τ: a learned temperature per head; heads are blocks of d_h channels (block-diagonal XCA)",
         "nn/xca.cpp, ops/xca_attention.h, ops/xca_attention_map.h"},
        {"eq-xcit-block", "The XCiT layer (§3.3, Fig. 1)",
         "x ← x + γ₁ · XCA(LN(x))\n"
         "x ← x + γ₃ · LPI(LN(x)),   LPI = DWConv3x3 ∘ BN ∘ GELU ∘ DWConv3x3 over the patch grid\n"
         "x ← x + γ₂ · FFN(LN(x))",
         "models/blocks.cpp, nn/lpi.cpp"},
        class_attention_reading()}},
      {"cait",
       {{"eq-layerscale", "LayerScale (CaiT Eq. 4, §2)",
         "x'_l = x_l + diag(λ_l,1, …, λ_l,d) × SA(η(x_l))\n"
         "x_l+1 = x'_l + diag(λ'_l,1, …, λ'_l,d) × FFN(η(x'_l))",
         "models/blocks.cpp"},
        {"eq-talking-heads", "Talking-heads attention (CaiT §4.3, after Shazeer et al. 2020)",
         "A = W_w · Softmax(W_l · Q Kᵀ / √d_h)\n"
         "W_l, W_w: learned h x h matrices mixing the heads' logits before the softmax and their maps after it",
         "nn/talking_heads.cpp"},
        class_attention_reading()}},
      {"coat",
       {{"eq-factor-attention", "Factorized attention (CoaT Eq. 3, §4.1)",
         "FactorAtt(X) = Q / √C · (softmax(K)ᵀ V)\n"
         "softmax over the tokens, per channel: softmax(K)ᵀ V is C x C, so no N x N map is formed",
         "nn/conv_attention.cpp, ops/factor_attention.h"},
        {"eq-crpe", "Convolutional relative position encoding (CoaT Eq. 10-11, §4.2)",
         "ÊV_img = Q_img ∘ DepthwiseConv2D(P, V_img),   ÊV = concat(ÊV_img, 0)   (the class token's row is 0)\n"
         "window sizes 3, 5, 7 over groups of heads",
         "nn/conv_attention.cpp"},
        {"eq-conv-attention", "Conv-attention (CoaT Eq. 12, §4.2)", "ConvAtt(X) = Q / √C · softmax(K)ᵀ V + ÊV",
         "nn/conv_attention.cpp, ops/factor_attention.h, ops/factor_attention_merge.h"},
        {"eq-coat-blocks", "Serial and parallel blocks (CoaT §5.1, Fig. 3-4)",
         "serial block: x ← CPE(x) = x + DWConv3x3(x_img);  x ← x + ConvAtt(LN(x));  x ← x + FFN(LN(x))\n"
         "parallel block: at stages 2-4 at once, each scale adds the other two scales' conv-attention outputs\n"
         "resized (bilinear) to its own grid, then its FFN (co-scale feature interpolation)",
         "models/blocks.cpp, models/coat_blocks.cpp"}}},
      {"ufo_vit",
       {{"eq-ufo", "UFO attention (UFO-ViT Eq. 3, §3.1)", "A(x) = XN_dim=filter(Q) · XN_dim=space(Kᵀ V)   (no softmax)",
         "nn/xnorm.cpp"},
        {"eq-xnorm", "XNorm (Eq. 4, §3.2)", "XN(a) = γ · a / ‖a‖₂   (γ learned, one per head)", "nn/xnorm.cpp"},
        {"eq-clusters", "Clusters and similarities (Eq. 5-8, §3.2)",
         "[KᵀV]_ij = Σ_k K_ki V_kj   (d_h x d_h, summed over all N tokens: linear in N)\n"
         "q̂_i = XN(Q_i,·),   k̂_j = XN([KᵀV]_·,j)   (cluster j)\n"
         "A(x)_ij = q̂_i · k̂_j",
         "nn/xnorm.cpp"},
        {"eq-ufo-class-attention", "Class attention with XNorm (UFO-ViT §3.3, after CaiT §3)",
         "out = W_o · XN(q_cls) · XN(Kᵀ V),   K, V from [x_class, x_patches]", "nn/xnorm.cpp, models/blocks.cpp"}}},
      {"vit",
       {{"eq-self-attention", "Multi-head self-attention (ViT Eq. 5-7; Vaswani et al. 2017, Eq. 1)",
         "A_h = Softmax(Q_h K_hᵀ / √d_h)   (N x N per head h: quadratic in the tokens)\n"
         "MSA(x) = W_o · concat_h(A_h V_h)\n"
         "x ← x + MSA(LN(x));   x ← x + MLP(LN(x))",
         "nn/attention.cpp, models/blocks.cpp"}}},
  };
  static const std::vector<Reading> none;
  std::vector<Reading> out;
  for (const std::string& family : families)
    for (const Reading& r : find_or(lists, family, none))
      if (std::none_of(out.begin(), out.end(), [&](const Reading& o) { return o.id == r.id; })) out.push_back(r);
  return out;
}

std::string paper_title(const std::string& family) {
  static const std::map<std::string, std::string> titles = {
      {"xcit", "XCiT: Cross-Covariance Image Transformers (El-Nouby et al., 2021)"},
      {"cait", "Going deeper with Image Transformers (CaiT; Touvron et al., 2021)"},
      {"coat", "Co-Scale Conv-Attentional Image Transformers (CoaT; Xu et al., 2021)"},
      {"ufo_vit", "UFO-ViT: High Performance Linear Vision Transformer without Softmax (Song, 2021)"},
      {"own", "the program's own token mixers (registered in C++: models/token_mixers.h)"},
      {"vit",
       "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale (ViT; Dosovitskiy et al., "
       "2021)"},
  };
  return find_or(titles, family, std::string());
}

std::string paper_titles(const std::vector<std::string>& families) {
  std::string out;
  for (const std::string& family : families) out += (out.empty() ? "" : "; ") + paper_title(family);
  return out;
}

std::string reading_anchor(const std::string& block_type) {
  static const std::map<std::string, std::string> anchors = {
      {"XCABlock", "eq-xca"},
      {"ClassAttentionBlock", "eq-class-attention"},
      {"LayerScaleBlock", "eq-talking-heads"},
      {"LayerScaleBlockClassAttn", "eq-class-attention"},
      {"SerialBlock", "eq-conv-attention"},
      {"ParallelBlock", "eq-coat-blocks"},
      {"UFOBlock", "eq-ufo"},
      {"UFOClassAttentionBlock", "eq-ufo-class-attention"},
      {"Block", "eq-self-attention"},
  };
  return find_or(anchors, block_type, std::string());
}

}  // namespace tessera::cli
