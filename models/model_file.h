// Model files (docs/models.md): a vision transformer written as YAML, versioned by its first key,
//
//   tessera_model: 1
//   stages:
//     - {embed_dim: 192, patch_embed: conv_stem, patch_size: 16, pos_embed: fourier,
//        blocks: [{repeat: 12, attn: xca, num_heads: 4, local: lpi, layer_scale: 1.0}]}
//   head: {cls_token: true, class_attention: {repeat: 2, style: xcit, num_heads: 4, layer_scale: 1.0}}
//
// read into a ModelSpec (models/model_spec.h), checked, and written back. A file is untrusted
// input: every error is a tessera::Error naming the file, the line and the key,
//   "my_model.yaml:7: key 'stages[0].blocks[1].attn': expected one of attention, talking_heads, ...,
//    got 'xcaa' (did you mean 'xca'?)"
// and the reader bounds every size so that no product of them overflows (fuzz/fuzz_model_file.cpp).
#pragma once
#include <span>
#include <string>
#include <vector>

#include "tessera/models/model_spec.h"

namespace tessera::models {

// Reads a model file's text; `source` names it in messages (a path, or a variant's name). Checks
// the syntax, the version, every key's name and every value's type and range, and then the spec
// as a whole (check_model_spec).
ModelSpec read_model_file(const std::string& text, const std::string& source);
// The same for a file on disk; an unreadable file is an error naming it.
ModelSpec load_model_file(const std::string& path);

// The checks across keys: dimensions that divide (embed_dim by num_heads, img_size by the patch
// sizes), combinations a model cannot be built with (a grid mixer beside a class token, factorised
// attention without its stage's class token, class attention without a class token, ...), and
// sizes no machine could hold. The messages name the key (and its line when the spec came from a
// file, and that ModelOptions set the value when they did).
void check_model_spec(const ModelSpec& spec);

// `spec` as a model file: every key written, so the text builds the same model by itself
// (Model::model_file, read_model_file(write_model_file(s)) gives s's values).
std::string write_model_file(const ModelSpec& spec);

// An error about `key` of `spec`: "SOURCE:LINE: key 'KEY': MESSAGE", with the line of the key or
// of the nearest enclosing key the file had.
[[noreturn]] void spec_error(const ModelSpec& spec, const std::string& key, const std::string& message);

// The named variants' model files, compiled into the library from models/files/*.yaml (so a
// program needs no file on disk), in name order.
struct ShippedModelFile {
  const char* name;
  const char* text;
};
std::span<const ShippedModelFile> shipped_model_files();
// The text of a named variant's file, comments included, as shipped: a copy is a file that builds
// the same model (`create_model("copy.yaml")`). An unknown name is an error listing similar names.
std::string model_file_text(const std::string& name);
// Whether `name` is a shipped variant.
bool is_shipped_model(const std::string& name);
// A shipped variant's file, read (a start for a spec written in code).
ModelSpec shipped_model_spec(const std::string& name);
// The same as the template of a family's config struct: its messages name `source` ("XcitConfig")
// and no line of the file.
ModelSpec config_template(const std::string& name, const std::string& source);

}  // namespace tessera::models
