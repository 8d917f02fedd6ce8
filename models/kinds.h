// The kinds a model file's words name (docs/models.md), and what each brings to the one builder
// (models/vision_transformer.cpp). Each kind is declared in the file of the family that brought it
// — XCA in models/xcit_blocks.cpp, talking heads in cait_blocks.cpp, factorised attention in
// coat_blocks.cpp, UFO attention in ufo_vit_blocks.cpp, ViT's attention and a program's own
// mixers in blocks.cpp — and models/kinds.cpp only says which file declares which. The builder asks
// here and so never names a family.
#pragma once
#include <array>
#include <functional>
#include <memory>

#include "tessera/models/blocks.h"
#include "tessera/models/model.h"
#include "tessera/models/model_spec.h"

namespace tessera::models {

// A trunk block's token mixer kind (a block's `attn:`).
struct TokenMixerKind {
  // The mixer, built where the block's constructor calls it.
  std::function<TokenMixer(const BlockSpec&, int64_t dim, double proj_drop, const StageShared&)> make_mixer;
  // The block: MixerBlock itself, or the family's subclass of it with typed handles to the parts.
  std::function<std::shared_ptr<MixerBlock>(const BlockSpec&, int64_t dim, BlockRates, const StageShared&,
                                            const LayerScaleNames&)>
      make_block;
};
const TokenMixerKind& mixer_kind(MixerKind kind);

// The block template of a kind: its family's class (with typed handles), built as MixerBlock is.
template <class Block>
std::shared_ptr<MixerBlock> make_block_of(const BlockSpec& b, int64_t dim, BlockRates rates, const StageShared& shared,
                                          const LayerScaleNames& names) {
  return std::make_shared<Block>(b, dim, rates, shared, names);
}

// The kinds no family brought, declared in models/blocks.cpp: ViT's self-attention and a program's
// own token mixer (models/token_mixers.h).
const TokenMixerKind& attention_kind();
const TokenMixerKind& registered_mixer_kind();

// A head's class-attention layer kind (`class_attention:`'s style and attn). Its forward maps
// [cls, patches] [B, 1+N, d] to the same with the class token updated (and, in XCiT's style, the
// patch tokens too).
using ClassAttentionMaker =
    std::function<std::shared_ptr<nn::Module>(const ClassAttentionSpec&, int64_t dim, BlockRates)>;
ClassAttentionMaker class_attention_kind(ClassAttentionStyle style, ClassMixerKind attn);

// The maker of a class-attention kind: its family's layer, built from the head's spec.
template <class Layer>
std::shared_ptr<nn::Module> make_class_attention_of(const ClassAttentionSpec& spec, int64_t dim, BlockRates rates) {
  return std::make_shared<Layer>(spec, dim, rates);
}

// A stage's patch embedding (`patch_embed:`): the module and how the model calls it, which also
// gives the token grid.
struct PatchEmbedding {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const Tensor&, int64_t*, int64_t*)> forward;
};
PatchEmbedding make_patch_embedding(PatchEmbedKind kind, int64_t patch_size, int64_t in_chans, int64_t embed_dim);

// A model file's parallel_blocks (CoaT's, the one kind): a block over the last three stages, given
// their CPEs and CRPEs, and the head's aggregate of the three scales' class tokens [B, 3, d] -> [B, d].
struct ParallelKind {
  std::function<std::shared_ptr<ParallelBlock>(const ParallelSpec&, int64_t dim, BlockRates,
                                               const std::array<StageShared, 3>&)>
      make_block;
  std::function<std::shared_ptr<nn::Module>()> make_aggregate;
};
const ParallelKind& parallel_kind();

// Whether a mixer kind has an inner width of its own (a spec's attn_dim, the model_kwarg attn_dim).
bool takes_attn_dim(MixerKind kind);
bool takes_attn_dim(ClassMixerKind kind);

// The families' views: the model the builder makes of a spec, as a family's class with typed
// handles to its parts where that family's view states it (models/builder.h), else null.
std::shared_ptr<Model> family_view(const ModelSpec& spec);

}  // namespace tessera::models
