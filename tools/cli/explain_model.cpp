// What `tessera explain` shows, gathered from one forward pass; see tools/cli/explain.h. Each
// block is read by the kind of its token mixer, where that module computes it (ForwardScope::probe
// in nn/), and drawn as its paper defines it: XCiT's d_h x d_h map (Eq. 1), CaiT's N x N map around
// talking heads, CoaT's factorised context and convolutional position term (Eq. 12), UFO-ViT's
// XNorm'd clusters, ViT's N x N self-attention. A named model and a hybrid model file are read alike.
#include <algorithm>
#include <cmath>
#include <map>

#include "tessera/autograd/grad_mode.h"
#include "tessera/core/autocast.h"
#include "tessera/models/coat_blocks.h"
#include "tessera/models/vision_transformer.h"
#include "tessera/models/xcit_blocks.h"
#include "tessera/nn/attention.h"
#include "tessera/nn/lpi.h"
#include "tessera/nn/probe.h"
#include "tessera/nn/talking_heads.h"
#include "tessera/nn/xnorm.h"
#include "tessera/ops/ops.h"
#include "tools/cli/explain.h"

namespace tessera::cli {

namespace {

// The side of the square patch grid of `n` tokens; 0 when `n` is not a square.
int64_t grid_side(int64_t n) {
  const auto s = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  return s * s == n ? s : 0;
}

// Tokens [1, T, d] may start with a class token: true when T - 1 is a square and T is not.
bool has_class_token(int64_t tokens) { return grid_side(tokens) == 0 && grid_side(tokens - 1) > 0; }

// Entry i of a float32 CPU tensor.
double entry(const Tensor& t, int64_t i) { return t.contiguous().data<float>()[i]; }

double norm_of(const Tensor& t) { return std::sqrt(entry(sum(t * t), 0)); }

// One value per patch token [n] (in grid order) as the grid [side, side].
Tensor as_grid(const Tensor& per_token) {
  const int64_t side = grid_side(per_token.numel());
  TS_CHECK(side > 0, "explain: ", per_token.numel(), " patch tokens do not form a square grid");
  return per_token.reshape({side, side}).contiguous();
}

// The block's token grid and how much it changed the residual stream, from what it received
// ("input") and returned ("output"), tokens [1, T, d] each.
void add_tokens(BlockView& view, const Tensor& in, const Tensor& out) {
  TS_CHECK(in.dim() == 3 && in.shape() == out.shape(), "explain: block ", view.path, " returned ", out.shape(),
           " for input ", in.shape());
  const int64_t T = out.size(1), first = has_class_token(T) ? 1 : 0;
  const Tensor patches = out.select(0, 0).narrow(0, first, T - first);
  view.token_norms.push_back(as_grid(sqrt(sum(patches * patches, {1}))));
  view.relative_updates.push_back(norm_of(out - in) / std::max(norm_of(in), 1e-30));
}

// A class-attention block updates the class token alone: its relative update, no grid.
void add_class_token_update(BlockView& view, const Tensor& in, const Tensor& out) {
  const Tensor cls_in = in.narrow(1, 0, 1), cls_out = out.narrow(1, 0, 1);
  view.relative_updates.push_back(norm_of(cls_out - cls_in) / std::max(norm_of(cls_in), 1e-30));
}

Figure make_figure(std::string key, std::string title, std::string caption, bool over_image) {
  Figure f;
  f.key = std::move(key);
  f.title = std::move(title);
  f.caption = std::move(caption);
  f.over_image = over_image;
  return f;
}

// A block's view before its pictures: its path, its type as the module names it, its equations.
BlockView view_of(const nn::Module& block, std::string path, std::string equation, std::string source) {
  BlockView v;
  v.path = std::move(path);
  v.type = block.type_name();
  v.equation = std::move(equation);
  v.source = std::move(source);
  return v;
}

std::string head_label(int64_t h) { return "head " + std::to_string(h); }

std::string fixed(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Softmax class attention [1, h, 1, 1 + N] (CaiT §3 "class attention", also XCiT's): per head, the
// class token's weights over the patches as a grid, and what it keeps for itself.
Figure class_attention_figure(const Tensor& attn) {
  Figure f =
      make_figure("class_attention", "Class attention: softmax(q_cls kᵀ / √d_h) over the patches",
                  "Where the class token looks: each head's weights over the patch tokens (the rest of each row, the "
                  "weight on the class token itself, is in the label; a row sums to 1).",
                  true);
  std::vector<double> cls;
  const int64_t heads = attn.size(1), n = attn.size(3) - 1;
  for (int64_t h = 0; h < heads; ++h) {
    const Tensor row = attn.select(0, 0).select(0, h).select(0, 0);
    f.maps.push_back(as_grid(row.narrow(0, 1, n)));
    cls.push_back(entry(row, 0));
    f.labels.push_back(head_label(h) + " · on itself " + fixed(cls.back()));
  }
  f.numbers.emplace_back("cls_weight", cls);
  return f;
}

// The patch the class attention weighs most, the mean over heads: CaiT's default query patch.
int64_t most_attended_patch(const Tensor& class_attention) {
  const Tensor w = mean(class_attention.select(0, 0).select(1, 0), {0});  // [1 + N]
  const int64_t n = w.numel() - 1;
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (entry(w, 1 + i) > entry(w, 1 + best)) best = i;
  return best;
}

// The patch whose rows of N x N maps are drawn, as a place on the image (fractions of its height and
// width), so that blocks on grids of other sizes (CoaT's stages) outline the same place.
struct QueryPlace {
  double row = 0.5, col = 0.5;
};

// The query place in a grid of side x side patches, row-major.
int64_t query_in_grid(const QueryPlace& q, int64_t side) {
  auto at = [side](double f) {
    return std::clamp<int64_t>(static_cast<int64_t>(f * static_cast<double>(side)), 0, side - 1);
  };
  return at(q.row) * side + at(q.col);
}

// Rows of N x N maps [1, h, T, T] for the query patch, per head, as grids over the patch tokens
// (a class token, when the tokens start with one, is left out of the picture).
Figure query_figure(const Tensor& attn, const QueryPlace& query, std::string key, std::string title,
                    std::string caption) {
  Figure f = make_figure(std::move(key), std::move(title), std::move(caption), true);
  const int64_t T = attn.size(3), first = has_class_token(T) ? 1 : 0, n = T - first, side = grid_side(n);
  TS_CHECK(side > 0, "explain: ", n, " patch tokens do not form a square grid");
  f.query_patch = query_in_grid(query, side);
  for (int64_t h = 0; h < attn.size(1); ++h) {
    f.maps.push_back(as_grid(attn.select(0, 0).select(0, h).select(0, first + f.query_patch).narrow(0, first, n)));
    f.labels.push_back(head_label(h));
  }
  return f;
}

// Matrices [1, h, r, c] per head.
Figure matrix_figure(const Tensor& m, std::string key, std::string title, std::string caption) {
  Figure f = make_figure(std::move(key), std::move(title), std::move(caption), false);
  for (int64_t h = 0; h < m.size(1); ++h) {
    f.maps.push_back(m.select(0, 0).select(0, h).contiguous());
    f.labels.push_back(head_label(h));
  }
  return f;
}

// Per-token norms over the channels of a head's term [1, h, N', C_h], the last `n` tokens (the
// patches), as grids.
Figure term_norm_figure(const Tensor& term, int64_t n, std::string key, std::string title, std::string caption) {
  Figure f = make_figure(std::move(key), std::move(title), std::move(caption), true);
  std::vector<double> means;
  const Tensor norms = sqrt(sum(term * term, {3})).select(0, 0);  // [h, N']
  for (int64_t h = 0; h < norms.size(0); ++h) {
    const Tensor patches = norms.select(0, h).narrow(0, norms.size(1) - n, n);
    f.maps.push_back(as_grid(patches));
    means.push_back(entry(mean(patches), 0));
    f.labels.push_back(head_label(h) + " · mean " + fixed(means.back()));
  }
  f.numbers.emplace_back("mean_norm", means);
  return f;
}

std::vector<double> per_head(const Tensor& param) {
  const Tensor p = param.detach().to(Device::cpu()).to(DType::Float32).reshape({-1}).contiguous();
  std::vector<double> out;
  for (int64_t i = 0; i < p.numel(); ++i) out.push_back(entry(p, i));
  return out;
}

// The pictures of one conv-attention module (CoaT Eq. 12); `stage` tells a parallel block's three
// scales apart (0 in a serial block, which works at one).
void add_conv_attention(const nn::FactorAttnConvRelPosEnc& attn, const nn::ProbeRecorder& probes, int stage,
                        BlockView& v) {
  const std::string key = stage ? "_stage" + std::to_string(stage) : "";
  const std::string suffix = stage ? " (stage " + std::to_string(stage) + ")" : "";
  v.figures.push_back(matrix_figure(
      probes.value(attn, "context"), "context" + key,
      "Factorised attention context softmax(K)ᵀV, C_h x C_h (Eq. 3)" + suffix,
      "The keys' softmax is taken over the tokens, per channel, so the keys and values meet in this small "
      "matrix first; every query then reads it (Q·softmax(K)ᵀV / √C_h): no N x N map is ever formed."));
  const Tensor crpe = probes.value(attn, "crpe_term");
  const int64_t n = crpe.size(2);
  Figure factor = term_norm_figure(probes.value(attn, "factor_term"), n, "factor_term_norm" + key,
                                   "‖Q·softmax(K)ᵀV / √C_h‖ per token: the factorised term" + suffix,
                                   "The size of the factorised attention's output at each patch.");
  Figure position = term_norm_figure(crpe, n, "crpe_term_norm" + key,
                                     "‖ÊV‖ = ‖Q ∘ DepthwiseConv(P, V)‖ per token: the conv. relative position term "
                                     "(Eq. 10-11)" +
                                         suffix,
                                     "The size of the convolutional relative position term at each patch: local "
                                     "structure that the factorised term, shared by all queries, cannot give.");
  std::vector<double> ratio;
  for (size_t h = 0; h < position.maps.size(); ++h) {
    ratio.push_back(position.numbers[0].second[h] / std::max(factor.numbers[0].second[h], 1e-30));
    position.labels[h] += " · " + fixed(ratio.back(), 2) + "x the factorised term";
  }
  position.numbers.emplace_back("ratio_to_factor_term", ratio);
  v.figures.push_back(std::move(factor));
  v.figures.push_back(std::move(position));
}

// UFO attention's clusters (Eq. 5, 8) and how each patch's normalised query meets them.
void add_ufo_attention(const Tensor& clusters, const Tensor& similarity, const Tensor& gamma, bool over_image,
                       BlockView& v) {
  const std::vector<double> g = per_head(gamma);
  Figure c = matrix_figure(clusters, "clusters", "XNorm'd cluster vectors XN_space(KᵀV), d_h x d_h (Eq. 5, 8)",
                           "KᵀV sums keys times values over all tokens (no softmax), then each column j, cluster "
                           "j, is scaled to length γ (XNorm, Eq. 4): d_h vectors that summarise the image.");
  for (size_t h = 0; h < g.size(); ++h) c.labels[h] += " · γ = " + fixed(g[h]);
  c.numbers.emplace_back("gamma", g);
  v.figures.push_back(std::move(c));
  if (!over_image) {
    v.figures.push_back(matrix_figure(similarity, "class_token_similarity",
                                      "The class token's similarity to each cluster, q̂ · k̂_j (Eq. 6-7)",
                                      "One row per head: the class token's update is this row (no softmax)."));
    return;
  }
  // Per head, the two clusters whose similarity varies most over the image.
  Figure s = make_figure(
      "cluster_similarity", "Similarity of each patch's normalised query to a cluster, q̂_n · k̂_j (Eq. 6-7)",
      "Per head, the two clusters whose similarity changes most across the image: where the patches agree with "
      "that cluster. This is the attention's output itself, with no softmax.",
      true);
  std::vector<double> chosen;
  const Tensor sim = similarity.select(0, 0);  // [h, N, d_h]
  s.maps_per_head = std::min<int64_t>(2, sim.size(2));
  for (int64_t h = 0; h < sim.size(0); ++h) {
    const Tensor var = mean(pow(sim.select(0, h) - mean(sim.select(0, h), {0}, true), 2.0), {0});  // [d_h]
    std::vector<int64_t> order(static_cast<size_t>(var.numel()));
    for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int64_t>(j);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return entry(var, a) > entry(var, b); });
    for (size_t k = 0; k < static_cast<size_t>(s.maps_per_head); ++k) {
      s.maps.push_back(as_grid(sim.select(0, h).select(1, order[k])));
      s.labels.push_back(head_label(h) + " · cluster " + std::to_string(order[k]));
      chosen.push_back(static_cast<double>(order[k]));
    }
  }
  s.numbers.emplace_back("cluster", chosen);
  v.figures.push_back(std::move(s));
}

// The model's input [C, R, R] as a picture, normalisation undone.
data::Image input_picture(const Tensor& image, const std::vector<double>& mean_rgb,
                          const std::vector<double>& std_rgb) {
  const Tensor x = image.to(Device::cpu()).to(DType::Float32).contiguous();
  const int64_t C = x.size(0), H = x.size(1), W = x.size(2);
  data::Image out(H, W, C == 1 ? 1 : 3);
  const float* p = x.data<float>();
  for (int64_t c = 0; c < out.channels; ++c)
    for (int64_t i = 0; i < H * W; ++i)
      out.pixels[i * out.channels + c] =
          static_cast<uint8_t>(std::clamp((p[c * H * W + i] * std_rgb[c] + mean_rgb[c]) * 255.0, 0.0, 255.0));
  return out;
}

// ---- blocks, by the kind of their token mixer ---------------------------------------------------

// Where each module sits in the model's state_dict ("blocks.3", "serial_blocks2.0"); a module
// reached by several paths keeps its first.
void collect_paths(const nn::Module& m, const std::string& prefix, std::map<const nn::Module*, std::string>& out) {
  for (const auto& [name, child] : m.named_children()) {
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    out.emplace(child.get(), path);
    collect_paths(*child, path, out);
  }
}

void add_family(Explanation& e, const std::string& family) {
  if (std::find(e.families.begin(), e.families.end(), family) == e.families.end()) e.families.push_back(family);
}

Figure xca_figure(const nn::XCA& attn, const nn::ProbeRecorder& probes) {
  const std::vector<double> tau = per_head(attn.temperature);
  Figure f = matrix_figure(
      probes.value(attn, "attention"), "xca_map",
      "Cross-covariance attention A_XC = Softmax(K̂ᵀQ̂ / τ), d_h x d_h (Eq. 1)",
      "Which feature channels mix: entry (i, j) is how much output channel i of the head takes from value channel "
      "j, after the tokens' covariance is normalised (Q̂, K̂ of unit norm over the tokens). Each row sums to 1; "
      "its size does not depend on the number of tokens, which is why XCiT is linear in it.");
  for (size_t h = 0; h < f.labels.size(); ++h) f.labels[h] += " · scale 1/τ = " + fixed(tau[h]);
  f.numbers.emplace_back("temperature", tau);
  return f;
}

// Whether `mixer` is one of the library's token mixers (not a program's own, models/token_mixers.h).
bool library_mixer(const nn::Module& mixer) {
  return dynamic_cast<const nn::XCA*>(&mixer) || dynamic_cast<const nn::TalkingHeadAttention*>(&mixer) ||
         dynamic_cast<const nn::Attention*>(&mixer) || dynamic_cast<const nn::FactorAttnConvRelPosEnc*>(&mixer) ||
         dynamic_cast<const nn::UFOAttention*>(&mixer);
}

// What a program's own token mixer showed as its "attention" (scope.probe, nn/probe.h) when that is
// a map over the block's tokens [1, h, T, T]; undefined otherwise.
Tensor own_token_attention(const models::MixerBlock& block, const nn::ProbeRecorder& probes) {
  if (library_mixer(*block.mixer)) return {};
  const std::vector<Tensor> shown = probes.values(*block.mixer, "attention");
  const int64_t T = probes.value(block, "input").size(1);
  if (shown.size() != 1 || shown[0].dim() != 4 || shown[0].size(2) != T || shown[0].size(3) != T) return {};
  return shown[0];
}

// One trunk block: its token mixer's pictures as that mixer's paper draws them, and the equations
// of the parts it has (the stage's CPE, the local mixer, LayerScale).
void explain_mixer_block(const models::MixerBlock& block, const std::string& path, const nn::ProbeRecorder& probes,
                         const QueryPlace& query, Explanation& e) {
  const nn::Module& mixer = *block.mixer;
  BlockView v = view_of(block, path, "", "");
  add_tokens(v, probes.value(block, "input"), probes.value(block, "output"));
  std::string family;
  if (const auto* xca = dynamic_cast<const nn::XCA*>(&mixer)) {
    family = "xcit", v.equation = "XCiT Eq. 1 (§3.2): XCA", v.source = "nn/xca.cpp";
    v.figures.push_back(xca_figure(*xca, probes));
  } else if (dynamic_cast<const nn::TalkingHeadAttention*>(&mixer)) {
    family = "cait", v.equation = "CaiT §4.3: talking-heads attention", v.source = "nn/talking_heads.cpp";
    v.figures.push_back(query_figure(
        probes.value(mixer, "attention_unmixed"), query, "attention_before_talking_heads",
        "Self-attention of the query patch before talking heads: softmax(q kᵀ / √d_h)",
        "What each head alone would attend to (a row of its N x N map, summing to 1): the query patch's weights "
        "over all patches. The cost of this map grows with the square of the number of tokens."));
    v.figures.push_back(
        query_figure(probes.value(mixer, "attention"), query, "attention_after_talking_heads",
                     "After talking heads: W_w · softmax(W_l · q kᵀ / √d_h)",
                     "The weights the block actually uses: the logits mixed across heads before the softmax (W_l), the "
                     "maps mixed again after it (W_w). Mixed maps need not sum to 1 or stay positive."));
  } else if (dynamic_cast<const nn::Attention*>(&mixer)) {
    family = "vit", v.equation = "ViT Eq. 5-7: multi-head self-attention", v.source = "nn/attention.cpp";
    v.figures.push_back(query_figure(
        probes.value(mixer, "attention"), query, "self_attention",
        "Self-attention of the query patch: softmax(q kᵀ / √d_h)",
        "Where the query patch looks: a row of each head's N x N map over the patches (with the weight on a class "
        "token, when the stage has one, the row sums to 1). The cost of this map grows with the square of the "
        "number of tokens."));
  } else if (const auto* factor = dynamic_cast<const nn::FactorAttnConvRelPosEnc*>(&mixer)) {
    family = "coat", v.equation = "CoaT Eq. 12 (conv-attention) in a serial block (§5.1)";
    v.source = "nn/conv_attention.cpp";
    add_conv_attention(*factor, probes, 0, v);
  } else if (const auto* ufo = dynamic_cast<const nn::UFOAttention*>(&mixer)) {
    family = "ufo_vit", v.equation = "UFO-ViT Eq. 3-8 (§3.1-3.2)", v.source = "nn/xnorm.cpp";
    add_ufo_attention(probes.value(*ufo, "clusters"), probes.value(*ufo, "similarity"), ufo->gamma, true, v);
  } else {  // a program's own (models/token_mixers.h): its tokens, its update, and its map if it shows one
    family = "own", v.equation = "a token mixer the program registered (" + mixer.type_name() + ")";
    v.source = "the program's own code";
    if (const Tensor map = own_token_attention(block, probes); map.defined())
      v.figures.push_back(query_figure(map, query, "own_attention",
                                       "The query patch's row of the attention " + mixer.type_name() + " showed",
                                       "What the module handed out as its \"attention\" (scope.probe), a map over the "
                                       "block's tokens: the query patch's row per head, over the patches."));
  }
  if (block.cpe) v.equation += "; CPE (CoaT §4.2)";
  if (block.local) {
    const bool lpi = dynamic_cast<const nn::LPI*>(block.local.get()) != nullptr;
    v.equation += lpi ? "; LPI (XCiT §3.3)" : "; depthwise conv (UFO-ViT §3.3)";
  }
  if (block.gamma1.defined()) v.equation += "; LayerScale (CaiT Eq. 4)";
  add_family(e, family);
  e.blocks.push_back(std::move(v));
}

// CoaT's parallel block (§5.1): conv-attention at the last three stages' scales at once.
void explain_parallel_block(const models::CoatParallelBlock& block, const std::string& path,
                            const nn::ProbeRecorder& probes, Explanation& e) {
  BlockView v = view_of(block, path,
                        "CoaT §5.1 parallel block: conv-attention Eq. 12 at three scales, co-scale feature "
                        "interpolation",
                        "models/coat_blocks.cpp");
  const std::vector<Tensor> in = probes.values(block, "input"), out = probes.values(block, "output");
  TS_CHECK(in.size() == 3 && out.size() == 3, "explain: parallel block ", path, " showed ", in.size(), " inputs and ",
           out.size(), " outputs, expected 3 scales");
  for (size_t k = 0; k < 3; ++k) {
    add_tokens(v, in[k], out[k]);
    add_conv_attention(*block.factoratt_crpe[k], probes, static_cast<int>(k) + 2, v);
  }
  add_family(e, "coat");
  e.blocks.push_back(std::move(v));
}

// A class-attention layer (CaiT §3; XCiT's form, §3.3; UFO-ViT's with XNorm, §3.3): the class
// token's update and, by its mixer's kind, where it looks or its clusters.
void explain_class_block(const nn::Module& block, const nn::Module& attn, const std::string& path,
                         const nn::ProbeRecorder& probes, Explanation& e) {
  BlockView v = view_of(block, path, "", "");
  add_class_token_update(v, probes.value(block, "input"), probes.value(block, "output"));
  if (const auto* ufo = dynamic_cast<const nn::UFOClassAttention*>(&attn)) {
    add_family(e, "ufo_vit");
    v.equation = "UFO-ViT §3.3 class attention with XNorm", v.source = "nn/xnorm.cpp";
    add_ufo_attention(probes.value(*ufo, "clusters"), probes.value(*ufo, "similarity"), ufo->gamma, false, v);
  } else {
    const bool xcit = dynamic_cast<const models::XcitClassAttentionBlock*>(&block) != nullptr;
    add_family(e, xcit ? "xcit" : "cait");
    v.equation = xcit ? "CaiT Eq. 5-9 class attention (XCiT §3.3)" : "CaiT Eq. 5-9 (§3): class attention";
    v.source = "nn/class_attention.cpp";
    v.figures.push_back(class_attention_figure(probes.value(attn, "attention")));
  }
  e.blocks.push_back(std::move(v));
}

// A class-attention layer's attention module: XCiT's block's attn, or a TokenOnlyBlock's mixer.
const nn::Module& class_attention_of(const nn::Module& block) {
  if (const auto* xcit = dynamic_cast<const models::XcitClassAttentionBlock*>(&block)) return *xcit->attn;
  const auto* token_only = dynamic_cast<const models::TokenOnlyBlock*>(&block);
  TS_CHECK(token_only != nullptr, "explain: class-attention layer ", block.type_name(), " is of no known kind");
  return *token_only->mixer;
}

// The head's softmax class-attention modules, in forward order.
std::vector<const nn::Module*> softmax_class_attentions(const models::VisionTransformer& m) {
  std::vector<const nn::Module*> out;
  if (m.class_blocks)
    for (const auto& b : *m.class_blocks)
      if (const nn::Module& a = class_attention_of(*b); dynamic_cast<const nn::ClassAttention*>(&a)) out.push_back(&a);
  return out;
}

// The query patch of N x N maps, when the model has any: the patch the last softmax class attention
// weighs most (CaiT's choice), else the centre of the image. e.note says which.
QueryPlace choose_query(const models::VisionTransformer& m, const nn::ProbeRecorder& probes, Explanation& e) {
  QueryPlace q;
  bool quadratic = false;
  for (const auto& stage : m.stages)
    for (const auto& b : *stage.blocks)
      quadratic = quadratic || dynamic_cast<const nn::Attention*>(b->mixer.get()) ||
                  dynamic_cast<const nn::TalkingHeadAttention*>(b->mixer.get()) ||
                  own_token_attention(*b, probes).defined();
  if (!quadratic) return q;
  const std::string other_grids =
      m.stages.size() > 1 ? " On the other stages' grids, the patch at the same place of the image." : "";
  const std::vector<const nn::Module*> class_attentions = softmax_class_attentions(m);
  if (class_attentions.empty()) {
    e.note =
        "The self-attention maps are drawn for one query patch, outlined on every map: the one at the centre "
        "of the image (the model has no softmax class attention to choose one)." +
        other_grids;
    return q;
  }
  const Tensor last = probes.value(*class_attentions.back(), "attention");
  const int64_t patch = most_attended_patch(last), side = grid_side(last.size(3) - 1);
  q.row = (static_cast<double>(patch / side) + 0.5) / static_cast<double>(side);
  q.col = (static_cast<double>(patch % side) + 0.5) / static_cast<double>(side);
  e.query_patch = patch;
  e.note = "The self-attention maps are drawn for one query patch: row " + std::to_string(patch / side) + ", column " +
           std::to_string(patch % side) + " of the " + (m.stages.size() > 1 ? "last stage's " : "") +
           "patch grid (counted from 0, top left), the patch the last class-attention layer weighs most (mean over "
           "its heads); it is outlined on every map." +
           other_grids;
  return q;
}

// Every block in forward order: the stages' blocks, the parallel blocks, the class-attention layers.
void explain_blocks(const models::VisionTransformer& m, const nn::ProbeRecorder& probes, Explanation& e) {
  std::map<const nn::Module*, std::string> paths;
  collect_paths(m, "", paths);
  const QueryPlace query = choose_query(m, probes, e);
  for (const auto& stage : m.stages)
    for (const auto& block : *stage.blocks) explain_mixer_block(*block, paths.at(block.get()), probes, query, e);
  if (m.parallel_blocks)
    for (const auto& block : *m.parallel_blocks) {
      const auto* coat = dynamic_cast<const models::CoatParallelBlock*>(block.get());
      TS_CHECK(coat != nullptr, "explain: parallel block ", block->type_name(), " is of no known kind");
      explain_parallel_block(*coat, paths.at(block.get()), probes, e);
    }
  if (m.class_blocks)
    for (const auto& block : *m.class_blocks)
      explain_class_block(*block, class_attention_of(*block), paths.at(block.get()), probes, e);
}

const std::vector<std::string>& attention_types() {
  static const std::vector<std::string> types = {
      "XCA",          "ClassAttn",         "TalkingHeadAttn", "FactorAttnConvRelPosEnc",
      "UFOAttention", "UFOClassAttention", "Attention"};
  return types;
}

}  // namespace

bool explainable(const models::Model& model) {
  return dynamic_cast<const models::VisionTransformer*>(&model) != nullptr;
}

Explanation explain_model(models::Model& model, const ExplainInput& input) {
  Explanation e;
  e.model = input.model_name;
  const auto* blocks = dynamic_cast<const models::VisionTransformer*>(&model);
  TS_CHECK(blocks != nullptr, "explain: ", input.model_name, " is a ", model.type_name(),
           ", not a model built from a model file's blocks (docs/models.md), which explain reads");
  e.weights = input.weights;
  e.image = input.image_path;
  e.img_size = input.image.size(3);
  e.view = input_picture(input.image.select(0, 0), input.mean, input.std);
  model.eval();

  nn::ProbeRecorder probes;
  Tensor logits;
  {
    NoGradGuard no_grad;
    std::optional<AutocastGuard> autocast;
    if (input.amp) autocast.emplace(model.device().type, *input.amp);
    nn::ObserveForward observe(probes);  // probes are kept as float32 (nn/probe.h)
    logits = model.forward(input.image.to(model.device())).to(Device::cpu()).to(DType::Float32);
  }
  const Tensor p = softmax(logits.select(0, 0), 0).contiguous();
  std::vector<int64_t> order(static_cast<size_t>(p.numel()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  const size_t k = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int64_t a, int64_t b) { return entry(p, a) > entry(p, b); });
  for (size_t i = 0; i < k; ++i)
    e.top5.emplace_back(input.class_names.at(static_cast<size_t>(order[i])), entry(p, order[i]));

  explain_blocks(*blocks, probes, e);
  e.summary = summarize(model, input.image.to(model.device()));
  return e;
}

ComputeAtSize compute_at_size(models::Model& model, int64_t img_size) {
  model.eval();
  const Tensor image = zeros({1, model.in_chans, img_size, img_size}).to(model.device());
  return compute_of(summarize(model, image), img_size);
}

ComputeAtSize compute_of(const ModelSummary& s, int64_t img_size) {
  ComputeAtSize c;
  c.img_size = img_size;
  c.total = s.macs;
  const auto& types = attention_types();
  for (const SummaryRow& row : s.rows) {
    // A shared row counts the calls made through its path (CoaT's mlp3, mlp4), not its first path's.
    if (std::find(types.begin(), types.end(), row.type) != types.end()) c.attention += row.macs;
    if (row.type == "Mlp") c.mlp += row.macs;
    if (row.depth == 1) c.per_stage.emplace_back(row.path, row.macs);
  }
  return c;
}

std::vector<int64_t> larger_sizes(int64_t img_size) {
  auto round_up = [](int64_t v) { return (v + 31) / 32 * 32; };
  const int64_t a = std::max(round_up(img_size * 3 / 2), img_size + 32);
  return {a, std::max(round_up(img_size * 2), a + 32)};
}

}  // namespace tessera::cli
