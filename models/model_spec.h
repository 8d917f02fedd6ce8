// A vision transformer as data: what a model file (docs/models.md) says, read into plain structs
// that the one builder (models/builder.h) turns into a model. Every named variant of the four
// families is such a file (models/files/), and so is any hybrid a researcher writes.
//
//   stages     one or more; each embeds the previous stage's tokens (the image for the first),
//              adds a position encoding, and runs its list of residual blocks on the token grid
//   parallel   CoaT's co-scale blocks over the last three stages (a block kind kept in code)
//   head       a class token and class-attention layers, pooling, a LayerNorm and the classifier
//
// Defaults are timm's where timm has the argument. Values are checked by check_model_spec
// (models/model_file.h), whose messages name the key and, for a file, its line.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tessera::models {

// The token mixer of a trunk block.
enum class MixerKind {
  Attention,        // multi-head self-attention (ViT; nn/attention.h)
  TalkingHeads,     // CaiT's talking-heads attention (nn/talking_heads.h)
  Xca,              // XCiT's cross-covariance attention (nn/xca.h)
  FactorAttention,  // CoaT's factorised attention with its convolutional relative positions (nn/conv_attention.h)
  Ufo,              // UFO-ViT's XNorm attention (nn/xnorm.h)
  Registered,       // one a program registered (models/token_mixers.h), named by BlockSpec::registered_attn
};
// What mixes neighbouring tokens on the grid after the token mixer.
enum class LocalKind {
  None,
  Lpi,     // XCiT's local patch interaction (nn/lpi.h), registered as local_mp
  DwConv,  // UFO-ViT's 3x3 depthwise convolution, registered as local_conv
};
enum class PatchEmbedKind {
  Linear,      // one p x p convolution with stride p (ViT, CaiT)
  LinearNorm,  // the same and a LayerNorm of the tokens (CoaT)
  ConvStem,    // XCiT's stem of stride-2 3x3 convolutions with BatchNorm and GELU (p = 4, 8 or 16)
};
enum class PosEmbedKind {
  None,
  Learned,  // a table of grid x grid positions, added once (CaiT, UFO-ViT)
  Fourier,  // XCiT's sine encoding of the grid, projected, added once
  Conv,     // CoaT's convolutional position encoding, applied before every block of the stage
};
// How a class-attention layer treats the patch tokens (both attend from the class token only).
// A model file writes each by the paper that brought it: `style: cait` and `style: xcit`.
enum class ClassAttentionStyle {
  ClassToken,  // CaiT's: the patch tokens stay as they are; the MLP runs on the class token
  AllTokens,   // XCiT's: the normalised patch tokens are added back as well (its tokens_norm option)
};
enum class ClassMixerKind {
  Softmax,  // CaiT's class attention (nn/class_attention.h)
  Ufo,      // UFO-ViT's, with XNorm (nn/xnorm.h)
};
enum class PoolKind {
  Cls,   // the class token
  Mean,  // the mean of the patch tokens
};

struct BlockSpec {
  int64_t repeat = 1;
  MixerKind attn = MixerKind::Attention;
  std::string registered_attn;  // with attn Registered: the name it was registered under
  int64_t num_heads = 12;
  int64_t attn_dim = 0;  // UFO attention's inner width E (UFO-ViT Table 1 "#Embed"); 0: embed_dim
  bool qkv_bias = true;
  LocalKind local = LocalKind::None;
  double mlp_ratio = 4.0;
  std::optional<double> layer_scale;  // LayerScale's initial value; none: no LayerScale
  std::optional<double> drop_path;    // none: the model's drop_path_rate
  std::optional<double> proj_drop;    // after the attention's output projection; none: the model's drop_rate
  std::optional<double> mlp_drop;     // in the MLP; none: the model's drop_rate
  double norm_eps = 1e-6;
  bool operator==(const BlockSpec&) const = default;
};

struct StageSpec {
  int64_t embed_dim = 768;
  PatchEmbedKind patch_embed = PatchEmbedKind::Linear;
  int64_t patch_size = 16;
  PosEmbedKind pos_embed = PosEmbedKind::None;
  bool cls_token = false;  // the stage's own class token, in front of its patch tokens (CoaT)
  // The windows of factorised attention's relative positions (CoaT Eq. 10-11): kernel size ->
  // heads; one CRPE per stage, shared by its blocks.
  std::map<int64_t, int64_t> crpe_windows = {{3, 2}, {5, 3}, {7, 3}};
  std::vector<BlockSpec> blocks;
  bool operator==(const StageSpec&) const = default;
};

// CoaT's parallel blocks (§5.1): attention at the last three stages' scales at once, each scale
// adding the others resampled to its grid. Absent when repeat is 0.
struct ParallelSpec {
  int64_t repeat = 0;
  double mlp_ratio = 4.0;
  std::optional<double> drop_path, proj_drop, mlp_drop;
  double norm_eps = 1e-6;
  bool operator==(const ParallelSpec&) const = default;
};

struct ClassAttentionSpec {
  int64_t repeat = 0;  // 0: no class-attention layers
  ClassAttentionStyle style = ClassAttentionStyle::ClassToken;
  ClassMixerKind attn = ClassMixerKind::Softmax;
  int64_t num_heads = 12;
  int64_t attn_dim = 0;  // UFO class attention's inner width; 0: embed_dim
  bool qkv_bias = true;
  double mlp_ratio = 4.0;
  std::optional<double> layer_scale;
  std::optional<double> proj_drop;  // none: the model's drop_rate
  std::optional<double> mlp_drop;   // none: the model's drop_rate
  bool tokens_norm = false;         // style xcit: normalise the patch tokens after the attention too
  double norm_eps = 1e-6;
  bool operator==(const ClassAttentionSpec&) const = default;
};

struct HeadSpec {
  bool cls_token = false;  // a class token of the model's, joined to the last stage's tokens
  ClassAttentionSpec class_attention;
  PoolKind pool = PoolKind::Cls;
  double norm_eps = 1e-6;
  bool operator==(const HeadSpec&) const = default;
};

struct ModelSpec {
  static constexpr int64_t kVersion = 1;  // the `tessera_model:` this build reads and writes

  std::string name;    // the variant's name (informational)
  std::string family;  // whose timm names the state_dict uses: "", "xcit", "cait", "coat" or "ufo_vit"
  int64_t num_classes = 1000, in_chans = 3, img_size = 224;
  double drop_rate = 0.0, drop_path_rate = 0.0;
  std::vector<StageSpec> stages;
  ParallelSpec parallel_blocks;
  HeadSpec head;

  // Where the values came from, for messages: the file's name, the line of each key path
  // ("stages[0].blocks[1].num_heads", 1-based; none for a spec made in code), and the keys that
  // ModelOptions changed after the file was read.
  std::string source;
  std::map<std::string, int64_t> lines;
  std::set<std::string> overridden;
};

// Whether two specs build the same model: every value but the name and where they came from.
inline bool same_architecture(const ModelSpec& a, const ModelSpec& b) {
  return a.family == b.family && a.num_classes == b.num_classes && a.in_chans == b.in_chans &&
         a.img_size == b.img_size && a.drop_rate == b.drop_rate && a.drop_path_rate == b.drop_path_rate &&
         a.stages == b.stages && a.parallel_blocks == b.parallel_blocks && a.head == b.head;
}

}  // namespace tessera::models
