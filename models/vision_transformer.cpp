#include "tessera/models/vision_transformer.h"

#include "tessera/models/kinds.h"
#include "tessera/models/model_file.h"
#include "tessera/models/model_file_names.h"
#include "tessera/models/pos_embed.h"
#include "tessera/nn/init.h"
#include "tessera/nn/lpi.h"  // tokens_to_map
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {

// A stage-level name: as it is with one stage, numbered from 1 with several (CoaT's patch_embed1).
std::string stage_name(const std::string& base, size_t stage, size_t stages) {
  return stages == 1 ? base : base + std::to_string(stage + 1);
}

Tensor trunc_normal_parameter(Tensor t) {
  nn::init::trunc_normal_(t, 0.02);
  return t;
}

}  // namespace

VisionTransformer::VisionTransformer(ModelSpec spec) : spec_(std::move(spec)) {
  check_model_spec(spec_);
  const ModelSpec& s = spec_;
  const size_t S = s.stages.size();
  const int64_t d_last = s.stages.back().embed_dim;
  num_classes = s.num_classes;
  default_img_size = s.img_size;
  in_chans = s.in_chans;
  model_file_ = write_model_file(s);
  stages.resize(S);

  // Registration order is timm's: parameters (class tokens, then position tables), patch
  // embeddings, Fourier encodings, CPEs, CRPEs, blocks, parallel blocks, class attention, norms,
  // aggregate, head. Each part draws its weights as it is made, in this order.
  if (s.head.cls_token) cls_token = trunc_normal_parameter(register_parameter("cls_token", zeros({1, 1, d_last})));
  for (size_t i = 0; i < S; ++i)
    if (s.stages[i].cls_token)
      stages[i].cls_token = trunc_normal_parameter(
          register_parameter(stage_name("cls_token", i, S), zeros({1, 1, s.stages[i].embed_dim})));
  int64_t grid = s.img_size;
  for (size_t i = 0; i < S; ++i) {
    grid /= s.stages[i].patch_size;
    if (s.stages[i].pos_embed == PosEmbedKind::Learned)
      stages[i].pos_embed = trunc_normal_parameter(
          register_parameter(stage_name("pos_embed", i, S), zeros({1, grid * grid, s.stages[i].embed_dim})));
  }
  int64_t in = s.in_chans;
  for (size_t i = 0; i < S; ++i) {
    const StageSpec& st = s.stages[i];
    PatchEmbedding e = make_patch_embedding(st.patch_embed, st.patch_size, in, st.embed_dim);
    stages[i].patch_embed = register_module(stage_name("patch_embed", i, S), e.module);
    embed_.push_back(std::move(e.forward));
    in = st.embed_dim;
  }
  for (size_t i = 0; i < S; ++i)
    if (s.stages[i].pos_embed == PosEmbedKind::Fourier)
      stages[i].fourier = register_module(stage_name("pos_embed", i, S),
                                          std::make_shared<nn::FourierPositionalEncoding>(s.stages[i].embed_dim));
  for (size_t i = 0; i < S; ++i)
    if (s.stages[i].pos_embed == PosEmbedKind::Conv)
      stages[i].cpe =
          register_module(stage_name("cpe", i, S), std::make_shared<nn::ConvPosEnc>(s.stages[i].embed_dim, 3));
  for (size_t i = 0; i < S; ++i) {
    const StageSpec& st = s.stages[i];
    for (const BlockSpec& b : st.blocks)
      if (b.attn == MixerKind::FactorAttention) {
        // One CRPE per stage, shared by its blocks (CoaT §4.2); its heads are the windows' (checked).
        const std::vector<std::pair<int64_t, int64_t>> windows(st.crpe_windows.begin(), st.crpe_windows.end());
        stages[i].crpe =
            register_module(stage_name("crpe", i, S),
                            std::make_shared<nn::ConvRelPosEnc>(st.embed_dim / b.num_heads, b.num_heads, windows));
        break;
      }
  }
  const file_names::FamilyNames& family = file_names::family_names(s.family);
  const LayerScaleNames gammas{std::string(family.gamma_mixer), std::string(family.gamma_mlp),
                               std::string(family.gamma_local)};
  for (size_t i = 0; i < S; ++i) {
    const StageSpec& st = s.stages[i];
    stages[i].blocks = register_module(S == 1 ? "blocks" : "serial_blocks" + std::to_string(i + 1),
                                       std::make_shared<nn::ModuleList<MixerBlock>>());
    const StageShared shared{stages[i].cpe, stages[i].crpe};
    for (const BlockSpec& b : st.blocks) {
      const BlockRates rates{b.proj_drop.value_or(s.drop_rate), b.mlp_drop.value_or(s.drop_rate),
                             b.drop_path.value_or(s.drop_path_rate)};
      for (int64_t r = 0; r < b.repeat; ++r)
        stages[i].blocks->push_back(mixer_kind(b.attn).make_block(b, st.embed_dim, rates, shared, gammas));
    }
  }
  const ParallelSpec& p = s.parallel_blocks;
  if (p.repeat > 0) {
    // Over the last three stages, with their CPEs and CRPEs (the spec's checks: all three have both).
    const std::array<StageShared, 3> last{StageShared{stages[S - 3].cpe, stages[S - 3].crpe},
                                          StageShared{stages[S - 2].cpe, stages[S - 2].crpe},
                                          StageShared{stages[S - 1].cpe, stages[S - 1].crpe}};
    const BlockRates rates{p.proj_drop.value_or(s.drop_rate), p.mlp_drop.value_or(s.drop_rate),
                           p.drop_path.value_or(s.drop_path_rate)};
    parallel_blocks = register_module("parallel_blocks", std::make_shared<nn::ModuleList<ParallelBlock>>());
    for (int64_t j = 0; j < p.repeat; ++j)
      parallel_blocks->push_back(parallel_kind().make_block(p, d_last, rates, last));
  }
  const ClassAttentionSpec& c = s.head.class_attention;
  if (c.repeat > 0) {
    const BlockRates rates{c.proj_drop.value_or(s.drop_rate), c.mlp_drop.value_or(s.drop_rate), 0.0};
    const ClassAttentionMaker make = class_attention_kind(c.style, c.attn);
    class_blocks = register_module(std::string(family.class_attention), std::make_shared<nn::ModuleList<nn::Module>>());
    for (int64_t j = 0; j < c.repeat; ++j) class_blocks->push_back(make(c, d_last, rates));
    if (c.style == ClassAttentionStyle::ClassToken) token_only_blocks = typed_view<TokenOnlyBlock>(class_blocks);
  }
  if (parallel_blocks) {
    for (size_t i = S - 3; i < S; ++i)
      norms.push_back(register_module("norm" + std::to_string(i + 1),
                                      std::make_shared<nn::LayerNorm>(s.stages[i].embed_dim, s.head.norm_eps)));
    aggregate = register_module("aggregate", parallel_kind().make_aggregate());
  } else {
    norms.push_back(
        register_module(stage_name("norm", S - 1, S), std::make_shared<nn::LayerNorm>(d_last, s.head.norm_eps)));
  }
  head = register_module("head", std::make_shared<nn::Linear>(d_last, s.num_classes));
  nn::init_trunc_normal(*head);
}

Tensor VisionTransformer::forward(const Tensor& images) {
  nn::ForwardScope scope(*this);
  const size_t S = stages.size();
  bool learned = false;
  for (const Stage& st : stages) learned |= st.pos_embed.defined();
  if (learned || S > 1) {
    TS_CHECK(images.defined() && images.dim() == 4 && images.size(1) == in_chans &&
                 images.size(2) == default_img_size && images.size(3) == default_img_size,
             type_name(), ": expected images [B, ", in_chans, ", ", default_img_size, ", ", default_img_size, "], got ",
             images.defined() ? images.shape() : Shape{},
             learned
                 ? " (the learned position table fixes the input size; build the model with img_size and load "
                   "weights trained at another size with load_weights)"
                 : " (a model of several stages has a fixed input size, as in timm; build the model with img_size)");
  } else {
    TS_CHECK(images.defined() && images.dim() == 4 && images.size(1) == in_chans, type_name(), ": expected images [B, ",
             in_chans, ", H, W], got ", images.defined() ? images.shape() : Shape{});
  }
  const bool train = is_training();
  const int64_t B = images.size(0);
  std::vector<Tensor> tokens(S);
  std::vector<TokenGrid> grids(S);
  Tensor input = images;
  for (size_t i = 0; i < S; ++i) {
    const Stage& stage = stages[i];
    int64_t H = 0, W = 0;
    Tensor x = embed_[i](input, &H, &W);
    if (stage.pos_embed.defined()) x = dropout(x + stage.pos_embed, spec_.drop_rate, train);
    if (stage.fourier) x = dropout(x + stage.fourier->forward(B, H, W), spec_.drop_rate, train);
    if (stage.cls_token.defined()) x = cat({stage.cls_token.expand({B, 1, x.size(2)}), x}, 1);
    for (const auto& block : *stage.blocks)
      x = run_block([block, H, W](const Tensor& t) { return block->forward(t, H, W); }, x);
    tokens[i] = x;
    grids[i] = {H, W};
    // The next stage embeds this stage's patch tokens (class token dropped) as a map.
    if (i + 1 < S) input = nn::tokens_to_map(x.narrow(1, stage.cls_token.defined() ? 1 : 0, H * W), H, W, "stage");
  }
  return scope.output(head->forward(dropout(pooled_features(tokens, grids), spec_.drop_rate, train)));
}

// The pooled, normalised features [B, d] the classifier reads.
Tensor VisionTransformer::pooled_features(std::vector<Tensor>& tokens, const std::vector<TokenGrid>& grids) {
  const size_t S = stages.size();
  if (parallel_blocks) {
    std::array<Tensor, 3> x{tokens[S - 3], tokens[S - 2], tokens[S - 1]};
    const std::array<TokenGrid, 3> g{grids[S - 3], grids[S - 2], grids[S - 1]};
    for (const auto& block : *parallel_blocks) x = block->forward(x, g);
    // The three class tokens normalised (the norms act per token), then aggregated (CoaT §5.1).
    return aggregate->forward(stack({norms[0]->forward(x[0].select(1, 0)), norms[1]->forward(x[1].select(1, 0)),
                                     norms[2]->forward(x[2].select(1, 0))},
                                    1));
  }
  Tensor x = tokens.back();
  const int64_t B = x.size(0), d = x.size(2);
  const bool stage_cls = stages.back().cls_token.defined();
  Tensor pooled;
  if (class_blocks) {
    // Class attention (CaiT §3): the class token, the model's or the stage's, reads the patches.
    if (!stage_cls) x = cat({cls_token.expand({B, 1, d}), x}, 1);
    for (const auto& block : *class_blocks) x = block->forward(x);
    pooled = x.select(1, 0);
  } else if (spec_.head.pool == PoolKind::Cls) {
    pooled = x.select(1, 0);
  } else {
    const int64_t first = stage_cls ? 1 : 0;
    pooled = mean(x.narrow(1, first, x.size(1) - first), {1});
  }
  // The norm acts per token: normalising the pooled token alone gives timm's norm-then-select.
  return norms[0]->forward(pooled);
}

nn::NamedTensors VisionTransformer::adapt_state_dict(nn::NamedTensors state) const {
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].pos_embed.defined())
      state = resize_pos_embed_entry(std::move(state), stage_name("pos_embed", i, stages.size()), stages[i].pos_embed);
  return state;
}

}  // namespace tessera::models
