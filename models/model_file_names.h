// The words a model file spells its kinds with (docs/models.md), shared by the reader and the writer
// so that what one writes the other reads.
#pragma once
#include <array>
#include <string_view>
#include <utility>

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
    {{"cait", ClassAttentionStyle::Cait}, {"xcit", ClassAttentionStyle::Xcit}}};
inline constexpr Names<ClassMixerKind, 2> kClassMixers{
    {{"class_attention", ClassMixerKind::Softmax}, {"ufo", ClassMixerKind::Ufo}}};
inline constexpr Names<PoolKind, 2> kPools{{{"cls", PoolKind::Cls}, {"mean", PoolKind::Mean}}};
// The naming conventions of `family:` ("" is written "none").
inline constexpr std::array<std::string_view, 5> kFamilies{"none", "xcit", "cait", "coat", "ufo_vit"};

template <class E, size_t N>
constexpr std::string_view name_of(const Names<E, N>& names, E value) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "?";
}

}  // namespace tessera::models::file_names
