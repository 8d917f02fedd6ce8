#include "tessera/models/coat.h"

#include "tessera/nn/init.h"
#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::models {

namespace {
constexpr double kCoatLayerNormEps = 1e-6;  // blocks and final norms (timm's norm_layer)
constexpr double kPatchNormEps = 1e-5;      // patch embeddings (plain nn.LayerNorm)
constexpr int64_t kTotalStride = 32;        // patch 4, then three stride-2 merges

std::shared_ptr<nn::Mlp> make_mlp(int64_t dim, double mlp_ratio, double drop) {
  auto mlp = std::make_shared<nn::Mlp>(dim, static_cast<int64_t>(dim * mlp_ratio), drop);
  nn::init_trunc_normal(*mlp);
  return mlp;
}

std::shared_ptr<nn::FactorAttnConvRelPosEnc> make_attention(int64_t dim, int64_t heads,
                                                            std::shared_ptr<nn::ConvRelPosEnc> crpe, double drop) {
  auto attn = std::make_shared<nn::FactorAttnConvRelPosEnc>(dim, heads, std::move(crpe), true, drop);
  nn::init_trunc_normal(*attn->qkv);
  nn::init_trunc_normal(*attn->proj);
  return attn;
}
}  // namespace

CoatPatchEmbed::CoatPatchEmbed(int64_t patch_size, int64_t in_chans, int64_t embed_dim)
    : nn::PatchEmbed(patch_size, in_chans, embed_dim) {
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(embed_dim, kPatchNormEps));
}

Tensor CoatPatchEmbed::forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w) {
  nn::ForwardScope scope(*this);
  return scope.output(norm->forward(nn::PatchEmbed::forward(x, grid_h, grid_w)));
}

CoatSerialBlock::CoatSerialBlock(int64_t dim, int64_t heads, double mlp_ratio, std::shared_ptr<nn::ConvPosEnc> cpe_,
                                 std::shared_ptr<nn::ConvRelPosEnc> crpe, double drop, double drop_path)
    : drop_path_(drop_path) {
  cpe = register_module("cpe", std::move(cpe_));
  norm1 = register_module("norm1", std::make_shared<nn::LayerNorm>(dim, kCoatLayerNormEps));
  factoratt_crpe = register_module("factoratt_crpe", make_attention(dim, heads, std::move(crpe), drop));
  norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(dim, kCoatLayerNormEps));
  mlp = register_module("mlp", make_mlp(dim, mlp_ratio, drop));
}

Tensor CoatSerialBlock::forward(const Tensor& x, int64_t H, int64_t W) {
  nn::ForwardScope scope(*this);
  scope.probe("input", x);  // what the block adds to: `tessera explain` draws its relative update
  const bool train = is_training();
  Tensor y = cpe->forward(x, H, W);  // re-applied in every block (§4.2, Fig. 2)
  y = y + nn::drop_path(factoratt_crpe->forward(norm1->forward(y), H, W), drop_path_, train);
  return scope.output(y + nn::drop_path(mlp->forward(norm2->forward(y)), drop_path_, train));
}

Tensor resample_tokens(const Tensor& x, CoatGrid from, CoatGrid to) {
  Tensor map = nn::tokens_to_map(x.narrow(1, 1, from.h * from.w), from.h, from.w, "resample_tokens");
  Tensor resized = interpolate(map, {to.h, to.w}, InterpolationMode::Bilinear);
  return cat({x.narrow(1, 0, 1), nn::map_to_tokens(resized)}, 1);
}

CoatParallelBlock::CoatParallelBlock(int64_t dim, int64_t heads, double mlp_ratio,
                                     const std::array<std::shared_ptr<nn::ConvRelPosEnc>, 3>& crpes, double drop,
                                     double drop_path)
    : drop_path_(drop_path) {
  // timm's registration order: norm12..14, factoratt_crpe2..4, norm22..24, mlp2..4.
  for (int i = 0; i < 3; ++i)
    norm1[i] =
        register_module("norm1" + std::to_string(i + 2), std::make_shared<nn::LayerNorm>(dim, kCoatLayerNormEps));
  for (int i = 0; i < 3; ++i)
    factoratt_crpe[i] =
        register_module("factoratt_crpe" + std::to_string(i + 2), make_attention(dim, heads, crpes[i], drop));
  for (int i = 0; i < 3; ++i)
    norm2[i] =
        register_module("norm2" + std::to_string(i + 2), std::make_shared<nn::LayerNorm>(dim, kCoatLayerNormEps));
  mlp = make_mlp(dim, mlp_ratio, drop);
  for (int i = 0; i < 3; ++i) register_module("mlp" + std::to_string(i + 2), mlp);
}

std::array<Tensor, 3> CoatParallelBlock::forward(const std::array<Tensor, 3>& x, const std::array<CoatGrid, 3>& grids) {
  nn::ForwardScope scope(*this);
  for (const Tensor& scale : x) scope.probe("input", scale);
  const bool train = is_training();
  std::array<Tensor, 3> cur;
  for (int i = 0; i < 3; ++i) cur[i] = factoratt_crpe[i]->forward(norm1[i]->forward(x[i]), grids[i].h, grids[i].w);
  // Co-scale mixing: every scale adds the other two resampled to its grid, summed in timm's order
  // (stage 2: +up(3) +up(4); stage 3: +up(4) +down(2); stage 4: +down(3) +down(2)).
  const int others[3][2] = {{1, 2}, {2, 0}, {1, 0}};
  std::array<Tensor, 3> mixed;
  for (int i = 0; i < 3; ++i) {
    mixed[i] = cur[i];
    for (int j : others[i]) mixed[i] = mixed[i] + resample_tokens(cur[j], grids[j], grids[i]);
  }
  std::array<Tensor, 3> out;
  for (int i = 0; i < 3; ++i) {
    Tensor y = x[i] + nn::drop_path(mixed[i], drop_path_, train);
    out[i] = y + nn::drop_path(mlp->forward(norm2[i]->forward(y)), drop_path_, train);
  }
  return scope.output(out);
}

CoatAggregate::CoatAggregate() {
  weight = register_parameter("weight", Tensor::empty({1, 3, 1}));
  bias = register_parameter("bias", Tensor::empty({1}));
  nn::init::default_weight_and_bias_(weight, bias);
}

Tensor CoatAggregate::forward(const Tensor& x) {
  nn::ForwardScope scope(*this);
  TS_CHECK(x.defined() && x.dim() == 3 && x.size(1) == 3, "CoatAggregate: expected stacked CLS tokens [B, 3, C], got ",
           x.defined() ? x.shape() : Shape{});
  return scope.output(conv1d(x, weight, bias).squeeze(1));
}

Coat::Coat(const CoatConfig& c) : config(c) {
  TS_CHECK(c.img_size > 0 && c.img_size % kTotalStride == 0, "Coat: img_size must be a positive multiple of ",
           kTotalStride, " (patch 4 and three stride-2 merges), got ", c.img_size);
  for (int s = 0; s < 4; ++s) {
    TS_CHECK(c.embed_dims[s] > 0 && c.embed_dims[s] % c.num_heads == 0, "Coat: embed_dims[", s, "] = ", c.embed_dims[s],
             " is not divisible by num_heads ", c.num_heads);
    TS_CHECK(c.serial_depths[s] >= 0 && c.mlp_ratios[s] > 0, "Coat: stage ", s + 1, " has depth ", c.serial_depths[s],
             " and mlp ratio ", c.mlp_ratios[s]);
  }
  TS_CHECK(c.parallel_depth >= 0, "Coat: parallel_depth must be non-negative, got ", c.parallel_depth);
  if (c.parallel_depth > 0)
    TS_CHECK(c.embed_dims[1] == c.embed_dims[2] && c.embed_dims[2] == c.embed_dims[3] &&
                 c.mlp_ratios[1] == c.mlp_ratios[2] && c.mlp_ratios[2] == c.mlp_ratios[3],
             "Coat: parallel blocks need equal embed dims and mlp ratios in stages 2-4, got dims ", c.embed_dims[1],
             ", ", c.embed_dims[2], ", ", c.embed_dims[3], " and ratios ", c.mlp_ratios[1], ", ", c.mlp_ratios[2], ", ",
             c.mlp_ratios[3]);
  num_classes = c.num_classes;
  default_img_size = c.img_size;
  in_chans = c.in_chans;
  const auto& C = c.embed_dims;

  // Registration order as timm: class tokens (parameters come first in state_dict anyway), patch
  // embeddings, CPEs, CRPEs, serial blocks, parallel blocks, norms, aggregate, head.
  for (int s = 0; s < 4; ++s) {
    cls_token[s] = register_parameter("cls_token" + std::to_string(s + 1), zeros({1, 1, C[s]}));
    nn::init::trunc_normal_(cls_token[s], 0.02);
  }
  for (int s = 0; s < 4; ++s)
    patch_embed[s] =
        register_module("patch_embed" + std::to_string(s + 1),
                        std::make_shared<CoatPatchEmbed>(s == 0 ? 4 : 2, s == 0 ? c.in_chans : C[s - 1], C[s]));
  for (int s = 0; s < 4; ++s)
    cpe[s] = register_module("cpe" + std::to_string(s + 1), std::make_shared<nn::ConvPosEnc>(C[s], 3));
  for (int s = 0; s < 4; ++s)
    crpe[s] = register_module("crpe" + std::to_string(s + 1),
                              std::make_shared<nn::ConvRelPosEnc>(C[s] / c.num_heads, c.num_heads));
  for (int s = 0; s < 4; ++s) {
    serial_blocks[s] =
        register_module("serial_blocks" + std::to_string(s + 1), std::make_shared<nn::ModuleList<CoatSerialBlock>>());
    for (int64_t j = 0; j < c.serial_depths[s]; ++j)
      serial_blocks[s]->push_back(std::make_shared<CoatSerialBlock>(C[s], c.num_heads, c.mlp_ratios[s], cpe[s], crpe[s],
                                                                    c.drop_rate, c.drop_path_rate));
  }
  if (c.parallel_depth > 0) {
    parallel_blocks = register_module("parallel_blocks", std::make_shared<nn::ModuleList<CoatParallelBlock>>());
    for (int64_t j = 0; j < c.parallel_depth; ++j)
      parallel_blocks->push_back(std::make_shared<CoatParallelBlock>(
          C[1], c.num_heads, c.mlp_ratios[1],
          std::array<std::shared_ptr<nn::ConvRelPosEnc>, 3>{crpe[1], crpe[2], crpe[3]}, c.drop_rate, c.drop_path_rate));
    norm2 = register_module("norm2", std::make_shared<nn::LayerNorm>(C[1], kCoatLayerNormEps));
    norm3 = register_module("norm3", std::make_shared<nn::LayerNorm>(C[2], kCoatLayerNormEps));
  }
  norm4 = register_module("norm4", std::make_shared<nn::LayerNorm>(C[3], kCoatLayerNormEps));
  if (c.parallel_depth > 0) aggregate = register_module("aggregate", std::make_shared<CoatAggregate>());
  head = register_module("head", std::make_shared<nn::Linear>(C[3], c.num_classes));
  nn::init_trunc_normal(*head);
}

Tensor Coat::forward(const Tensor& images) {
  nn::ForwardScope scope(*this);
  TS_CHECK(images.defined() && images.dim() == 4 && images.size(1) == config.in_chans &&
               images.size(2) == config.img_size && images.size(3) == config.img_size,
           "Coat: expected images [B, ", config.in_chans, ", ", config.img_size, ", ", config.img_size, "], got ",
           images.defined() ? images.shape() : Shape{}, " (the input size is fixed; build the model with img_size)");
  const bool train = is_training();
  const int64_t B = images.size(0);
  std::array<Tensor, 4> x;
  std::array<CoatGrid, 4> grid;
  Tensor input = images;
  for (int s = 0; s < 4; ++s) {
    Tensor tokens = patch_embed[s]->forward(input, &grid[s].h, &grid[s].w);
    x[s] = cat({cls_token[s].expand({B, 1, config.embed_dims[s]}), tokens}, 1);
    for (const auto& block : *serial_blocks[s])
      x[s] = run_block([block, g = grid[s]](const Tensor& t) { return block->forward(t, g.h, g.w); }, x[s]);
    // The next stage embeds this stage's image tokens (CLS dropped) as a map.
    if (s < 3) input = nn::tokens_to_map(x[s].narrow(1, 1, grid[s].h * grid[s].w), grid[s].h, grid[s].w, "Coat");
  }
  if (!parallel_blocks)
    return scope.output(head->forward(dropout(norm4->forward(x[3].select(1, 0)), config.drop_rate, train)));

  std::array<Tensor, 3> xp{x[1], x[2], x[3]};
  const std::array<CoatGrid, 3> grids{grid[1], grid[2], grid[3]};
  for (const auto& block : *parallel_blocks) {
    for (int i = 0; i < 3; ++i) xp[i] = cpe[i + 1]->forward(xp[i], grids[i].h, grids[i].w);
    xp = block->forward(xp, grids);
  }
  // The final norms act per token, so normalising only the CLS tokens gives timm's values.
  Tensor z = stack(
      {norm2->forward(xp[0].select(1, 0)), norm3->forward(xp[1].select(1, 0)), norm4->forward(xp[2].select(1, 0))},
      1);  // [B, 3, C]
  return scope.output(head->forward(dropout(aggregate->forward(z), config.drop_rate, train)));
}

// mlpc-ucsd/CoaT's checkpoints hold norms, an aggregation and a head the variant does not use
// (models/official_keys.h).
const OfficialKeyMap& Coat::official_keys() const {
  static const OfficialKeyMap map{{}, {"norm1", "norm2", "norm3", "norm4", "aggregate", "head"}, {}};
  return map;
}

}  // namespace tessera::models
