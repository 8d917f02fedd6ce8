// Writing a spec as a model file; see models/model_file.h. Every key is written (the defaults too),
// numbers in their shortest exact form, so the text read back gives the same spec.
#include <cctype>
#include <charconv>
#include <cstdio>
#include <sstream>

#include "tessera/models/model_file.h"
#include "tessera/models/model_file_names.h"

namespace tessera::models {

namespace {

namespace fn = file_names;

std::string number_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

std::string flag_text(bool v) { return v ? "true" : "false"; }

// A name as a YAML scalar: plain when it is letters, digits and _ . -, double-quoted otherwise.
std::string name_text(const std::string& s) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  bool plain = !s.empty() && word(s[0]);
  for (char c : s) plain = plain && (word(c) || c == '.' || c == '-');
  if (plain) return s;
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\x%02x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class Writer {
 public:
  void key(int indent, const std::string& k, const std::string& value) {
    out_ << std::string(indent, ' ') << k << ": " << value << "\n";
  }
  void open(int indent, const std::string& k) { out_ << std::string(indent, ' ') << k << ":\n"; }
  // The first key of a list item: "  - key: value".
  void item(int indent, const std::string& k, const std::string& value) {
    out_ << std::string(indent, ' ') << "- " << k << ": " << value << "\n";
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string layer_scale_text(const std::optional<double>& v) { return v ? number_text(*v) : "false"; }

void write_block(Writer& w, const BlockSpec& b) {
  w.item(6, "repeat", std::to_string(b.repeat));
  w.key(8, "attn", b.attn == MixerKind::Registered ? b.registered_attn : std::string(fn::name_of(fn::kMixers, b.attn)));
  w.key(8, "num_heads", std::to_string(b.num_heads));
  if (b.attn_dim) w.key(8, "attn_dim", std::to_string(b.attn_dim));
  w.key(8, "qkv_bias", flag_text(b.qkv_bias));
  w.key(8, "local", std::string(fn::name_of(fn::kLocals, b.local)));
  w.key(8, "mlp_ratio", number_text(b.mlp_ratio));
  w.key(8, "layer_scale", layer_scale_text(b.layer_scale));
  if (b.drop_path) w.key(8, "drop_path", number_text(*b.drop_path));
  if (b.proj_drop) w.key(8, "proj_drop", number_text(*b.proj_drop));
  if (b.mlp_drop) w.key(8, "mlp_drop", number_text(*b.mlp_drop));
  w.key(8, "norm_eps", number_text(b.norm_eps));
}

void write_stage(Writer& w, const StageSpec& s) {
  w.item(2, "embed_dim", std::to_string(s.embed_dim));
  w.key(4, "patch_embed", std::string(fn::name_of(fn::kPatchEmbeds, s.patch_embed)));
  w.key(4, "patch_size", std::to_string(s.patch_size));
  w.key(4, "pos_embed", std::string(fn::name_of(fn::kPosEmbeds, s.pos_embed)));
  w.key(4, "cls_token", flag_text(s.cls_token));
  std::string windows;
  for (const auto& [kernel, heads] : s.crpe_windows)
    windows += (windows.empty() ? "" : ", ") + std::to_string(kernel) + ": " + std::to_string(heads);
  w.key(4, "crpe_windows", "{" + windows + "}");
  if (s.blocks.empty()) w.key(4, "blocks", "[]");
  else w.open(4, "blocks");
  for (const BlockSpec& b : s.blocks) write_block(w, b);
}

void write_head(Writer& w, const HeadSpec& h) {
  w.open(0, "head");
  w.key(2, "cls_token", flag_text(h.cls_token));
  w.key(2, "pool", std::string(fn::name_of(fn::kPools, h.pool)));
  w.key(2, "norm_eps", number_text(h.norm_eps));
  const ClassAttentionSpec& c = h.class_attention;
  if (c.repeat == 0) return;
  w.open(2, "class_attention");
  w.key(4, "repeat", std::to_string(c.repeat));
  w.key(4, "style", std::string(fn::name_of(fn::kStyles, c.style)));
  w.key(4, "attn", std::string(fn::name_of(fn::kClassMixers, c.attn)));
  w.key(4, "num_heads", std::to_string(c.num_heads));
  if (c.attn_dim) w.key(4, "attn_dim", std::to_string(c.attn_dim));
  w.key(4, "qkv_bias", flag_text(c.qkv_bias));
  w.key(4, "mlp_ratio", number_text(c.mlp_ratio));
  w.key(4, "layer_scale", layer_scale_text(c.layer_scale));
  if (c.proj_drop) w.key(4, "proj_drop", number_text(*c.proj_drop));
  if (c.mlp_drop) w.key(4, "mlp_drop", number_text(*c.mlp_drop));
  if (c.style == ClassAttentionStyle::AllTokens) w.key(4, "tokens_norm", flag_text(c.tokens_norm));
  w.key(4, "norm_eps", number_text(c.norm_eps));
}

}  // namespace

std::string write_model_file(const ModelSpec& spec) {
  Writer w;
  w.key(0, "tessera_model", std::to_string(ModelSpec::kVersion));
  if (!spec.name.empty()) w.key(0, "name", name_text(spec.name));
  w.key(0, "family", spec.family.empty() ? "none" : spec.family);
  w.key(0, "num_classes", std::to_string(spec.num_classes));
  w.key(0, "in_chans", std::to_string(spec.in_chans));
  w.key(0, "img_size", std::to_string(spec.img_size));
  w.key(0, "drop_rate", number_text(spec.drop_rate));
  w.key(0, "drop_path_rate", number_text(spec.drop_path_rate));
  w.open(0, "stages");
  for (const StageSpec& s : spec.stages) write_stage(w, s);
  const ParallelSpec& p = spec.parallel_blocks;
  if (p.repeat > 0) {
    w.open(0, "parallel_blocks");
    w.key(2, "repeat", std::to_string(p.repeat));
    w.key(2, "mlp_ratio", number_text(p.mlp_ratio));
    if (p.drop_path) w.key(2, "drop_path", number_text(*p.drop_path));
    if (p.proj_drop) w.key(2, "proj_drop", number_text(*p.proj_drop));
    if (p.mlp_drop) w.key(2, "mlp_drop", number_text(*p.mlp_drop));
    w.key(2, "norm_eps", number_text(p.norm_eps));
  }
  write_head(w, spec.head);
  return w.text();
}

}  // namespace tessera::models
