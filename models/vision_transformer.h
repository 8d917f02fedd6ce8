// The one model class every model file builds (models/model_spec.h; docs/models.md): stages of
// residual blocks on token grids, CoaT's parallel blocks, and a head. Its forward pass, for
// images [B, C, H, W]:
//   for each stage: embed the input (the image, then the previous stage's patch tokens as a map),
//     add a learned or Fourier position encoding (dropout after it), put the stage's class token
//     in front, run the blocks (each applies the stage's CPE first when it has one);
//   parallel blocks over the last three stages (CoaT §5.1);
//   head: class-attention layers on the model's or the last stage's class token, pool (the class
//     token, CoaT's aggregate of three, or the mean of the patch tokens), LayerNorm, dropout, Linear.
// State_dict names are timm's for each family (models/files/*.yaml reproduce its variants key for
// key): one stage names its parts patch_embed, pos_embed, blocks, norm; several number them as
// CoaT does (patch_embed1, cpe1, crpe1, serial_blocks1, norm4, cls_token1). What a family names
// otherwise is the model file's `family:` (models/model_file_names.h); what each kind of block or
// embedding builds is its family's declaration (models/kinds.h). This file names no family.
#pragma once
#include <memory>
#include <vector>

#include "tessera/models/blocks.h"
#include "tessera/models/model.h"
#include "tessera/models/model_spec.h"
#include "tessera/nn/positional.h"

namespace tessera::models {

class VisionTransformer : public Model {
 public:
  // Checks `spec` (check_model_spec) and builds it, initialised as timm initialises the family.
  explicit VisionTransformer(ModelSpec spec);
  Tensor forward(const Tensor& images) override;
  std::string type_name() const override { return "VisionTransformer"; }
  // Learned position tables of another square size are resampled to this model's grid (bicubic,
  // as timm's resample_abs_pos_embed).
  nn::NamedTensors adapt_state_dict(nn::NamedTensors state) const override;
  const ModelSpec& spec() const { return spec_; }

  struct Stage {
    Tensor cls_token;  // the stage's class token [1, 1, d], or undefined
    Tensor pos_embed;  // a learned table [1, grid², d], or undefined
    std::shared_ptr<nn::Module> patch_embed;
    std::shared_ptr<nn::FourierPositionalEncoding> fourier;  // or null
    std::shared_ptr<nn::ConvPosEnc> cpe;                     // or null
    std::shared_ptr<nn::ConvRelPosEnc> crpe;                 // or null: the stage has no factorised attention
    std::shared_ptr<nn::ModuleList<MixerBlock>> blocks;
  };
  std::vector<Stage> stages;
  Tensor cls_token;                                                // the head's class token [1, 1, d], or undefined
  std::shared_ptr<nn::ModuleList<ParallelBlock>> parallel_blocks;  // null without
  // The class-attention layers, each [cls, patches] -> [cls', patches'] (null without); the same
  // modules as TokenOnlyBlocks where they are of style cait (else null).
  std::shared_ptr<nn::ModuleList<nn::Module>> class_blocks;
  std::shared_ptr<nn::ModuleList<TokenOnlyBlock>> token_only_blocks;
  std::vector<std::shared_ptr<nn::LayerNorm>> norms;  // one, or one per parallel scale
  std::shared_ptr<nn::Module> aggregate;              // with parallel blocks only: [B, 3, d] -> [B, d]
  std::shared_ptr<nn::Linear> head;

 private:
  Tensor pooled_features(std::vector<Tensor>& tokens, const std::vector<TokenGrid>& grids);
  ModelSpec spec_;
  // How each stage's patch embedding is called (the three kinds share no base class).
  std::vector<std::function<Tensor(const Tensor&, int64_t*, int64_t*)>> embed_;
};

// The typed view a family's class keeps of a list of blocks: the same modules as T (each must be
// one), in a list of its own that the model does not register.
template <class T, class B>
std::shared_ptr<nn::ModuleList<T>> typed_view(const std::shared_ptr<nn::ModuleList<B>>& list) {
  auto view = std::make_shared<nn::ModuleList<T>>();
  if (list)
    for (const auto& m : *list) {
      auto typed = std::dynamic_pointer_cast<T>(m);
      TS_CHECK(typed != nullptr, "typed_view: a ", m->type_name(), " is not the family's block");
      view->push_back(typed);
    }
  return view;
}

}  // namespace tessera::models
