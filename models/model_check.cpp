// The checks of a model spec as a whole; see models/model_file.h. Each names the key it is about,
// so that a file's author is pointed at the line to change; the bounds keep every size a model
// could be built with far below what overflows an int64 (and a spec over 10 billion parameters is
// refused before anything is allocated).
#include <algorithm>
#include <cmath>

#include "tessera/core/error.h"
#include "tessera/models/model_file.h"
#include "tessera/models/model_file_names.h"
#include "tessera/models/token_mixers.h"

namespace tessera::models {

namespace {

constexpr int64_t kMaxWidth = int64_t{1} << 16;    // embed_dim, attn_dim
constexpr int64_t kMaxCount = int64_t{1} << 12;    // heads, repeats, blocks in a stage, input channels
constexpr int64_t kMaxImage = int64_t{1} << 14;    // img_size
constexpr int64_t kMaxClasses = int64_t{1} << 24;  // as model_kwargs' values
constexpr double kMaxRatio = 1024, kMaxLayerScale = 1e6, kMaxParameters = 1e10;

// The key under which messages name an item of a list: "stages[1].blocks[0]".
std::string list_item(const std::string& list, size_t i) { return list + "[" + std::to_string(i) + "]"; }

class Checker {
 public:
  explicit Checker(const ModelSpec& spec) : s_(spec) {}

  void run() {
    in_range("num_classes", s_.num_classes, 1, kMaxClasses);
    in_range("in_chans", s_.in_chans, 1, kMaxCount);
    in_range("img_size", s_.img_size, 1, kMaxImage);
    rate("drop_rate", s_.drop_rate);
    rate("drop_path_rate", s_.drop_path_rate);
    const auto& families = file_names::kFamilies;
    if (!s_.family.empty() && std::find(families.begin(), families.end(), s_.family) == families.end())
      fail("family", "expected one of none, xcit, cait, coat, ufo_vit, got '" + s_.family + "'");
    if (s_.stages.empty() || s_.stages.size() > 8)
      fail("stages", "expected 1 to 8 stages, got " + std::to_string(s_.stages.size()));
    int64_t grid = s_.img_size, in = s_.in_chans;
    for (size_t i = 0; i < s_.stages.size(); ++i) {
      check_stage(list_item("stages", i), s_.stages[i], i, grid, in);
      in = s_.stages[i].embed_dim;
    }
    check_parallel();
    check_head();
    if (parameters_ > kMaxParameters)
      fail("stages", detail::concat("the model would have about ", parameters_, " parameters, over the limit of ",
                                    kMaxParameters));
  }

 private:
  [[noreturn]] void fail(const std::string& key, const std::string& message) const { spec_error(s_, key, message); }

  void in_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) const {
    if (v < lo || v > hi) fail(key, detail::concat("expected an integer in [", lo, ", ", hi, "], got ", v));
  }
  void real_in(const std::string& key, double v, double lo, double hi, const char* interval) const {
    if (!(v > lo && v <= hi))
      fail(key, detail::concat("expected a number in ", interval[0], lo, ", ", hi, interval[1], ", got ", v));
  }
  void rate(const std::string& key, double v) const {
    if (!(v >= 0 && v < 1)) fail(key, detail::concat("expected a rate in [0, 1), got ", v));
  }
  void rate(const std::string& key, const std::optional<double>& v) const {
    if (v) rate(key, *v);
  }
  void layer_scale(const std::string& key, const std::optional<double>& v) const {
    if (v && !(*v >= 0 && *v <= kMaxLayerScale))
      fail(key, detail::concat("expected an initial value in [0, ", kMaxLayerScale, "] or false (none), got ", *v));
  }
  void norm_eps(const std::string& key, double v) const { real_in(key, v, 0, 1, "(]"); }
  // The MLP's width int(dim * ratio), as timm's, must be at least 1.
  void mlp(const std::string& key, int64_t dim, double ratio) {
    real_in(key, ratio, 0, kMaxRatio, "(]");
    if (static_cast<int64_t>(static_cast<double>(dim) * ratio) < 1)
      fail(key, detail::concat("mlp_ratio ", ratio, " leaves the MLP of width ", dim, " no hidden unit"));
    parameters_ += 2 * dim * dim * ratio;
  }
  // Heads that split `width` channels evenly.
  void heads(const std::string& path, int64_t heads, int64_t width, const char* width_key) {
    in_range(path + ".num_heads", heads, 1, kMaxCount);
    if (width % heads != 0)
      fail(path + ".num_heads", detail::concat(width_key, " ", width, " is not divisible by num_heads ", heads));
  }
  // UFO attention's inner width E, or attn_dim given to a mixer without one.
  int64_t attn_width(const std::string& path, int64_t attn_dim, bool ufo, int64_t dim) {
    if (!ufo && attn_dim != 0)
      fail(path + ".attn_dim", "attn_dim is UFO attention's inner width; this attention has none");
    in_range(path + ".attn_dim", attn_dim, 0, kMaxWidth);
    return attn_dim ? attn_dim : dim;
  }

  void check_stage(const std::string& path, const StageSpec& st, size_t index, int64_t& grid, int64_t in) {
    in_range(path + ".embed_dim", st.embed_dim, 1, kMaxWidth);
    in_range(path + ".patch_size", st.patch_size, 1, kMaxImage);
    const int64_t d = st.embed_dim, p = st.patch_size;
    if (st.patch_embed == PatchEmbedKind::ConvStem) {
      if (p != 4 && p != 8 && p != 16)
        fail(path + ".patch_size", detail::concat("the conv_stem patch size must be 4, 8 or 16, got ", p));
      const int64_t halvings = p == 16 ? 3 : p == 8 ? 2 : 1;
      if (d % (int64_t{1} << halvings) != 0)
        fail(path + ".embed_dim",
             detail::concat("embed_dim ", d, " is not divisible by ", int64_t{1} << halvings,
                            ": the conv_stem of patch size ", p, " halves it ", halvings, " times"));
      parameters_ += 9.0 * (in + d) * d;
    } else {
      parameters_ += static_cast<double>(p) * p * in * d;
    }
    if (grid % p != 0)
      fail(path + ".patch_size", index == 0
                                     ? detail::concat("img_size ", s_.img_size, " is not a multiple of patch size ", p)
                                     : detail::concat("the previous stage's token grid of ", grid, "x", grid,
                                                      " is not a multiple of patch size ", p));
    grid /= p;
    if (st.pos_embed == PosEmbedKind::Learned) parameters_ += static_cast<double>(grid) * grid * d;
    if (st.pos_embed == PosEmbedKind::Conv && !st.cls_token)
      fail(path + ".pos_embed",
           "pos_embed conv (CoaT's convolutional position encoding) passes the stage's class "
           "token through and needs one: set cls_token: true");
    int64_t window_heads = 0;
    for (const auto& [kernel, heads] : st.crpe_windows) {
      if (kernel < 1 || kernel > 31 || kernel % 2 == 0)
        fail(path + ".crpe_windows", detail::concat("kernel sizes must be odd, 1 to 31, got ", kernel));
      in_range(path + ".crpe_windows", heads, 1, kMaxCount);
      window_heads += heads;
    }
    if (st.blocks.size() > 64) fail(path + ".blocks", "at most 64 entries");
    int64_t depth = 0;
    for (size_t j = 0; j < st.blocks.size(); ++j) {
      check_block(list_item(path + ".blocks", j), st.blocks[j], st, window_heads);
      depth += st.blocks[j].repeat;
    }
    if (depth > kMaxCount) fail(path + ".blocks", detail::concat("at most ", kMaxCount, " blocks, got ", depth));
  }

  void check_block(const std::string& path, const BlockSpec& b, const StageSpec& st, int64_t window_heads) {
    const int64_t d = st.embed_dim;
    in_range(path + ".repeat", b.repeat, 0, kMaxCount);
    const bool ufo = b.attn == MixerKind::Ufo;
    if (b.attn == MixerKind::Registered && !registered_token_mixer(b.registered_attn))
      fail(path + ".attn", "no token mixer is registered as '" + b.registered_attn + "' (models/token_mixers.h)");
    const int64_t E = attn_width(path, b.attn_dim, ufo, d);
    heads(path, b.num_heads, E, ufo ? (b.attn_dim ? "attn_dim" : "embed_dim") : "embed_dim");
    if (b.attn == MixerKind::FactorAttention) {
      if (!st.cls_token)
        fail(path + ".attn",
             "factor_attention (CoaT's) leaves the stage's class token out of its relative "
             "positions and needs one: set the stage's cls_token: true");
      if (window_heads != b.num_heads)
        fail(path + ".num_heads",
             detail::concat("factor_attention's ", b.num_heads,
                            " heads must be the stage's crpe_windows' heads, which add up to ", window_heads));
    }
    if (b.local != LocalKind::None && st.cls_token)
      fail(path + ".local", detail::concat("local ", file_names::name_of(file_names::kLocals, b.local),
                                           " mixes the token grid and cannot take the stage's class token"));
    mlp(path + ".mlp_ratio", d, b.mlp_ratio);
    layer_scale(path + ".layer_scale", b.layer_scale);
    rate(path + ".drop_path", b.drop_path);
    rate(path + ".proj_drop", b.proj_drop);
    rate(path + ".mlp_drop", b.mlp_drop);
    norm_eps(path + ".norm_eps", b.norm_eps);
    const double per_block = 4.0 * d * E + (b.attn == MixerKind::FactorAttention ? 49.0 * d : 0) + 18.0 * d;
    parameters_ += per_block * b.repeat;
  }

  void check_parallel() {
    const ParallelSpec& p = s_.parallel_blocks;
    if (p.repeat == 0) return;
    in_range("parallel_blocks.repeat", p.repeat, 0, kMaxCount);
    const size_t n = s_.stages.size();
    if (n < 3) fail("parallel_blocks", detail::concat("parallel blocks run over the last three stages; there are ", n));
    const StageSpec& first = s_.stages[n - 3];
    int64_t heads = 0;
    for (size_t i = n - 3; i < n; ++i) {
      const StageSpec& st = s_.stages[i];
      const std::string path = list_item("stages", i);
      if (st.embed_dim != first.embed_dim)
        fail(path + ".embed_dim", detail::concat("parallel blocks need one embed_dim in the last three stages, got ",
                                                 first.embed_dim, " and ", st.embed_dim));
      if (st.pos_embed != PosEmbedKind::Conv || !st.cls_token)
        fail(path,
             "parallel blocks apply the last three stages' convolutional position encodings: they need "
             "pos_embed: conv and cls_token: true");
      // The stage's CRPE has its factorised attention's heads (all its blocks', checked above).
      const auto factor = std::find_if(st.blocks.begin(), st.blocks.end(),
                                       [](const BlockSpec& b) { return b.attn == MixerKind::FactorAttention; });
      if (factor == st.blocks.end())
        fail(path + ".blocks",
             "parallel blocks use the stage's factor_attention relative positions: the stage has "
             "no factor_attention block");
      if (i == n - 3) heads = factor->num_heads;
      if (factor->num_heads != heads)
        fail(path + ".blocks", detail::concat("parallel blocks need one number of factor_attention heads in the last "
                                              "three stages, got ",
                                              heads, " and ", factor->num_heads));
    }
    if (s_.head.class_attention.repeat > 0)
      fail("head.class_attention",
           "a model with parallel blocks pools the class tokens of its last three stages "
           "(CoaT's aggregate); class attention on top of them is not built");
    if (s_.head.pool != PoolKind::Cls) fail("head.pool", "parallel blocks pool the class tokens: pool must be cls");
    mlp("parallel_blocks.mlp_ratio", first.embed_dim, p.mlp_ratio);
    rate("parallel_blocks.drop_path", p.drop_path);
    rate("parallel_blocks.proj_drop", p.proj_drop);
    rate("parallel_blocks.mlp_drop", p.mlp_drop);
    norm_eps("parallel_blocks.norm_eps", p.norm_eps);
    parameters_ += 12.0 * first.embed_dim * first.embed_dim * p.repeat;
  }

  void check_head() {
    const HeadSpec& h = s_.head;
    const StageSpec& last = s_.stages.back();
    const int64_t d = last.embed_dim;
    if (h.cls_token && last.cls_token)
      fail("head.cls_token", "the last stage has its class token already: a second one is not built");
    const bool has_cls = h.cls_token || last.cls_token;
    const ClassAttentionSpec& c = h.class_attention;
    in_range("head.class_attention.repeat", c.repeat, 0, kMaxCount);
    if (c.repeat > 0) {
      if (!has_cls)
        fail("head.class_attention",
             "class attention updates a class token: set head.cls_token: true (or the "
             "last stage's cls_token)");
      const bool ufo = c.attn == ClassMixerKind::Ufo;
      if (ufo && c.style == ClassAttentionStyle::AllTokens)
        fail("head.class_attention.attn",
             "style xcit is XCiT's class-attention layer, built with attn: "
             "class_attention only");
      if (h.pool != PoolKind::Cls)
        fail("head.pool", "class attention updates the class token, which the head then reads: pool must be cls");
      if (c.tokens_norm && c.style != ClassAttentionStyle::AllTokens)
        fail("head.class_attention.tokens_norm", "tokens_norm is an option of style xcit");
      const std::string path = "head.class_attention";
      const int64_t E = attn_width(path, c.attn_dim, ufo, d);
      heads(path, c.num_heads, E, ufo && c.attn_dim ? "attn_dim" : "the last stage's embed_dim");
      mlp(path + ".mlp_ratio", d, c.mlp_ratio);
      layer_scale(path + ".layer_scale", c.layer_scale);
      rate(path + ".proj_drop", c.proj_drop);
      rate(path + ".mlp_drop", c.mlp_drop);
      norm_eps(path + ".norm_eps", c.norm_eps);
      parameters_ += 4.0 * d * E * c.repeat;
    } else if (h.cls_token) {
      fail("head.cls_token",
           "a class token with no class attention would see no patch token: add "
           "head.class_attention, or pool: mean without a class token");
    }
    if (h.pool == PoolKind::Cls && !has_cls)
      fail("head.pool", "pool cls needs a class token (head.cls_token or the last stage's cls_token), or pool: mean");
    norm_eps("head.norm_eps", h.norm_eps);
    parameters_ += static_cast<double>(d) * s_.num_classes;
  }

  const ModelSpec& s_;
  double parameters_ = 0;  // an estimate, within a few percent: enough to refuse absurd sizes
};

// The line of `key`, or of the nearest enclosing key the file had.
int64_t line_of(const ModelSpec& spec, std::string key) {
  while (!key.empty()) {
    if (auto it = spec.lines.find(key); it != spec.lines.end()) return it->second;
    const size_t cut = key.find_last_of(".[");
    key = cut == std::string::npos ? "" : key.substr(0, cut);
  }
  auto it = spec.lines.find("(file)");
  return it == spec.lines.end() ? 0 : it->second;
}

}  // namespace

void spec_error(const ModelSpec& spec, const std::string& key, const std::string& message) {
  const int64_t line = line_of(spec, key);
  std::string where = spec.source.empty() ? std::string("model spec") : spec.source;
  if (line > 0) where += ":" + std::to_string(line);
  const std::string what =
      key == "(file)" ? "" : " key '" + key + "'" + (spec.overridden.count(key) ? " (set by ModelOptions)" : "") + ":";
  throw Error(where + ":" + what + " " + message);
}

void check_model_spec(const ModelSpec& spec) { Checker(spec).run(); }

}  // namespace tessera::models
