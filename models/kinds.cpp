// Which file declares each kind a model file names (models/kinds.h): each line points to the
// family's own declaration (the patch embeddings, one constructor each, are made here).
#include "tessera/models/kinds.h"

#include "tessera/models/cait.h"
#include "tessera/models/coat.h"
#include "tessera/models/model_file_names.h"
#include "tessera/models/ufo_vit.h"
#include "tessera/models/xcit.h"

namespace tessera::models {

namespace {

template <class Embed>
PatchEmbedding patch_embedding(std::shared_ptr<Embed> e) {
  return {e, [e](const Tensor& x, int64_t* h, int64_t* w) { return e->forward(x, h, w); }};
}

}  // namespace

const TokenMixerKind& mixer_kind(MixerKind kind) {
  switch (kind) {
    case MixerKind::Attention: return attention_kind();               // models/blocks.cpp (ViT)
    case MixerKind::Registered: return registered_mixer_kind();       // models/blocks.cpp (a program's)
    case MixerKind::Xca: return xca_kind();                           // models/xcit_blocks.cpp
    case MixerKind::TalkingHeads: return talking_heads_kind();        // models/cait_blocks.cpp
    case MixerKind::FactorAttention: return factor_attention_kind();  // models/coat_blocks.cpp
    case MixerKind::Ufo: return ufo_attention_kind();                 // models/ufo_vit_blocks.cpp
  }
  throw Error("model spec: unknown token mixer kind");
}

ClassAttentionMaker class_attention_kind(ClassAttentionStyle style, ClassMixerKind attn) {
  if (style == ClassAttentionStyle::AllTokens && attn == ClassMixerKind::Softmax)
    return make_class_attention_of<XcitClassAttentionBlock>;  // models/xcit_blocks.h
  if (style == ClassAttentionStyle::ClassToken && attn == ClassMixerKind::Softmax)
    return make_class_attention_of<LayerScaleClassAttentionBlock>;  // models/cait_blocks.h
  if (style == ClassAttentionStyle::ClassToken && attn == ClassMixerKind::Ufo)
    return make_class_attention_of<UFOClassAttentionBlock>;  // models/ufo_vit_blocks.h
  throw Error("model spec: head.class_attention: no class-attention layer has style " +
              std::string(file_names::name_of(file_names::kStyles, style)) + " with attn " +
              std::string(file_names::name_of(file_names::kClassMixers, attn)));
}

PatchEmbedding make_patch_embedding(PatchEmbedKind kind, int64_t patch_size, int64_t in_chans, int64_t embed_dim) {
  switch (kind) {
    case PatchEmbedKind::Linear:  // nn/patch_embed.h (ViT's)
      return patch_embedding(std::make_shared<nn::PatchEmbed>(patch_size, in_chans, embed_dim));
    case PatchEmbedKind::LinearNorm:  // models/coat_blocks.cpp
      return patch_embedding(std::make_shared<CoatPatchEmbed>(patch_size, in_chans, embed_dim));
    case PatchEmbedKind::ConvStem:  // nn/patch_embed.h (XCiT's stem)
      return patch_embedding(std::make_shared<nn::ConvPatchEmbed>(patch_size, embed_dim, in_chans));
  }
  throw Error("model spec: unknown patch embedding kind");
}

const ParallelKind& parallel_kind() { return coat_parallel_kind(); }  // models/coat_blocks.cpp

// UFO attention's inner width E (UFO-ViT Table 1 "#Embed"; models/ufo_vit_blocks.cpp).
bool takes_attn_dim(MixerKind kind) { return kind == MixerKind::Ufo; }
bool takes_attn_dim(ClassMixerKind kind) { return kind == ClassMixerKind::Ufo; }

std::shared_ptr<Model> family_view(const ModelSpec& spec) {
  if (Xcit::describes(spec)) return std::make_shared<Xcit>(spec);
  if (Cait::describes(spec)) return std::make_shared<Cait>(spec);
  if (UfoVit::describes(spec)) return std::make_shared<UfoVit>(spec);
  if (Coat::describes(spec)) return std::make_shared<Coat>(spec);
  return nullptr;
}

}  // namespace tessera::models
