// `tessera explain`: what one model computes for one image, block by block, as the four papers
// define their attention; gathered from one forward pass (the modules' probes, nn/module.h) and
// written as one self-contained HTML page (explain_page.cpp) or as JSON (explain_json.cpp).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/image.h"
#include "tessera/models/model.h"
#include "tools/cli/summary.h"

namespace tessera::cli {

// One kind of picture of a block: a map per head.
struct Figure {
  std::string key;                  // its name in --json ("xca_map")
  std::string title;                // "Cross-covariance attention softmax(K̂ᵀQ̂ / τ), d_h x d_h (Eq. 3)"
  std::string caption;              // how to read it
  bool over_image = false;          // a map over the patch grid, drawn over the image; else a matrix
  std::vector<Tensor> maps;         // float32 [rows, cols], one per head (or per cluster)
  std::vector<std::string> labels;  // one per map ("head 2 · τ = 0.84")
  int64_t query_patch = -1;         // rows of N x N maps: the query patch (row-major in the map's grid), outlined
  int64_t maps_per_head = 1;        // consecutive maps of one head (UFO-ViT: two clusters each)
  // Numbers per map that the labels show, by name ("temperature", "cls_weight"), for --json.
  std::vector<std::pair<std::string, std::vector<double>>> numbers;
};

// One block of the network, as the page shows it.
struct BlockView {
  std::string path;      // "blocks.3" (the anchor on the page is "block-blocks.3")
  std::string type;      // "XCABlock"
  std::string equation;  // the paper's equations it implements ("XCiT Eq. 1-3 (§3.1)")
  std::string source;    // the Tessera file that implements its attention
  // Per token grid it works on (CoaT's parallel blocks: three scales): the norm of each patch
  // token of its output [gh, gw], and ‖out − in‖ / ‖in‖ over its tokens (the class token alone
  // for class-attention blocks, whose patch tokens pass unchanged).
  std::vector<Tensor> token_norms;
  std::vector<double> relative_updates;
  std::vector<Figure> figures;
};

// MACs of one forward pass of one image at one resolution, split by what does them.
struct ComputeAtSize {
  int64_t img_size = 0;
  int64_t total = 0, attention = 0, mlp = 0;               // attention: the attention modules' subtrees
  std::vector<std::pair<std::string, int64_t>> per_stage;  // the model's top-level children
};

struct Explanation {
  std::string model;
  // The papers its blocks come from, in forward order: "xcit", "cait", "coat", "ufo_vit", "vit" (plain
  // self-attention), "own" (a token mixer the program registered); one for a named model, several for
  // a hybrid model file.
  std::vector<std::string> families;
  std::string weights;  // the file, or "" for an untrained model
  std::string image;    // the image file
  int64_t img_size = 0;
  data::Image view;                                  // the model's input, normalisation undone
  std::vector<std::pair<std::string, double>> top5;  // class name, probability
  ModelSummary summary;
  std::vector<BlockView> blocks;  // in forward order
  std::vector<ComputeAtSize> compute;
  std::string note;          // what the pictures choose (the query patch of N x N maps)
  int64_t query_patch = -1;  // that patch, row-major in the grid of the class attention that chose it
};

struct ExplainInput {
  std::string model_name, weights, image_path;  // weights: "" for an untrained model
  Tensor image;                                 // the transformed image [1, C, R, R]
  std::vector<double> mean, std;                // the normalisation, to undo for the picture
  std::vector<std::string> class_names;         // one per class
  std::optional<DType> amp;                     // --amp: the forward pass under autocast
};

// Whether explain can draw `model`: one built from a model file's blocks (models::VisionTransformer:
// every named variant and every hybrid), whose blocks it reads by the kind of their token mixer.
bool explainable(const models::Model& model);

// The forward pass of the image through `model` (in eval mode) with its probes recorded, turned
// into a view per block (by its token mixer's kind), the top-5 and the module summary. `compute`
// is left to the caller.
Explanation explain_model(models::Model& model, const ExplainInput& input);

// MACs of one pass of one img_size x img_size image through `model` (built for that size).
ComputeAtSize compute_at_size(models::Model& model, int64_t img_size);
// The same split of a summary already made (Explanation::summary, at the model's own size).
ComputeAtSize compute_of(const ModelSummary& s, int64_t img_size);
// Two sizes above img_size to compare the cost at: about 1.5x and 2x, multiples of 32 (CoaT's
// stride) and distinct ({352, 448} for 224).
std::vector<int64_t> larger_sizes(int64_t img_size);

// The page and the JSON.
std::string explanation_html(const Explanation& e);
std::string explanation_json(const Explanation& e);

}  // namespace tessera::cli
