// The words a model file spells its kinds with (docs/models.md), shared by the reader and the writer
// so that what one writes the other reads.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "tessera/core/error.h"
#include "tessera/models/model_spec.h"

namespace tessera::models::file_names {

template <class E, size_t N>
using Names = std::array<std::pair<std::string_view, E>, N>;

inline constexpr Names<MixerKind, 5> kMixers{{{"attention", MixerKind::Attention},
                                              {"talking_heads", MixerKind::TalkingHeads},
                                              {"xca", MixerKind::Xca},
                                              {"factor_attention", MixerKind::FactorAttention},
                                              {"ufo", MixerKind::Ufo}}};
inline constexpr Names<LocalKind, 3> kLocals{
    {{"none", LocalKind::None}, {"lpi", LocalKind::Lpi}, {"dwconv", LocalKind::DwConv}}};
inline constexpr Names<PatchEmbedKind, 3> kPatchEmbeds{{{"linear", PatchEmbedKind::Linear},
                                                        {"linear_norm", PatchEmbedKind::LinearNorm},
                                                        {"conv_stem", PatchEmbedKind::ConvStem}}};
inline constexpr Names<PosEmbedKind, 4> kPosEmbeds{{{"none", PosEmbedKind::None},
                                                    {"learned", PosEmbedKind::Learned},
                                                    {"fourier", PosEmbedKind::Fourier},
                                                    {"conv", PosEmbedKind::Conv}}};
inline constexpr Names<ClassAttentionStyle, 2> kStyles{
    {{"cait", ClassAttentionStyle::ClassToken}, {"xcit", ClassAttentionStyle::AllTokens}}};
inline constexpr Names<ClassMixerKind, 2> kClassMixers{
    {{"class_attention", ClassMixerKind::Softmax}, {"ufo", ClassMixerKind::Ufo}}};
inline constexpr Names<PoolKind, 2> kPools{{{"cls", PoolKind::Cls}, {"mean", PoolKind::Mean}}};
// What a model file's `family:` decides: the state_dict names of the parts the families share, as
// timm names them in that family ("" is written "none", and names as XCiT does).
struct FamilyNames {
  std::string_view family;
  std::string_view gamma_mixer, gamma_mlp, gamma_local;  // a trunk block's LayerScale gammas
  std::string_view class_attention;                      // the head's list of class-attention layers
};
inline constexpr std::array<FamilyNames, 5> kFamilyNames{{
    {"none", "gamma1", "gamma2", "gamma3", "cls_attn_blocks"},
    {"xcit", "gamma1", "gamma2", "gamma3", "cls_attn_blocks"},
    {"cait", "gamma_1", "gamma_2", "gamma_3", "blocks_token_only"},
    {"coat", "gamma1", "gamma2", "gamma3", "cls_attn_blocks"},
    {"ufo_vit", "gamma1", "gamma2", "gamma3", "cls_attn_blocks"},
}};
inline constexpr std::array<std::string_view, 5> kFamilies{kFamilyNames[0].family, kFamilyNames[1].family,
                                                           kFamilyNames[2].family, kFamilyNames[3].family,
                                                           kFamilyNames[4].family};
// The names of `family` (a spec's: "" for none; the spec's checks refuse any other).
inline const FamilyNames& family_names(std::string_view family) {
  for (const FamilyNames& f : kFamilyNames)
    if (f.family == family || (family.empty() && f.family == "none")) return f;
  throw Error("model spec: family '" + std::string(family) + "' is not one of none, xcit, cait, coat, ufo_vit");
}

template <class E, size_t N>
constexpr std::string_view name_of(const Names<E, N>& names, E value) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "?";
}

}  // namespace tessera::models::file_names
