// Reading model files; see models/model_file.h. yaml-cpp parses the text; everything after that is
// ours: each mapping is read against the list of keys it may have (an unknown key is an error that
// suggests the nearest known one), each value is parsed strictly from its text (no quoted numbers,
// no "1e400", no YAML 1.1 "yes"), and every key's line is kept for the checks that follow.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "tessera/core/error.h"
#include "tessera/io/untrusted_text.h"
#include "tessera/models/model_file.h"
#include "tessera/models/model_file_names.h"
#include "tessera/models/token_mixers.h"

namespace tessera::models {

namespace {

namespace fn = file_names;

// Lists longer than this are refused before they are read (the checks bound the values).
constexpr size_t kMaxStages = 8, kMaxBlockEntries = 64, kMaxWindows = 8;

// Levenshtein distance, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the nearest of `known` within a third of the word's length, or "".
template <class Words>
std::string did_you_mean(std::string_view word, const Words& known) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (const auto& k : known) {
    const size_t d = edit_distance(word, k);
    if (d < best_distance) best_distance = d, best = std::string(k);
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

template <class Words>
std::string joined_words(const Words& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + std::string(w);
  return out;
}

// What a node is, for "got ...".
std::string describe_node(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  const std::string& s = n.Scalar();
  return (n.Tag() == "!" ? "the quoted text '" : "'") + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "'";
}

// A plain (unquoted) scalar's text, or nullptr.
const std::string* plain_scalar(const YAML::Node& n) { return n.IsScalar() && n.Tag() != "!" ? &n.Scalar() : nullptr; }

bool parse_integer(const std::string& s, int64_t* out) {
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(begin, end, *out);
  return begin != end && ec == std::errc() && p == end;
}

bool parse_finite(const std::string& s, double* out) {
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(begin, end, *out);
  return begin != end && ec == std::errc() && p == end && std::isfinite(*out);
}

// Reading one mapping of the file: its keys against the list it may have, then its values by key.
class Mapping {
 public:
  // `what` names the mapping in messages ("a block", "the head").
  Mapping(ModelSpec& spec, const YAML::Node& node, std::string path, std::string what,
          std::vector<std::string_view> keys)
      : spec_(spec), node_(node), path_(std::move(path)) {
    if (!node.IsMap()) fail(path_, node, "expected " + what + " (a mapping of keys), got " + describe_node(node));
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const YAML::Node& key = entry.first;
      if (!plain_scalar(key)) fail(path_, key, "expected a key name, got " + describe_node(key));
      const std::string& name = key.Scalar();
      const std::string at = at_key(name);
      if (std::find(keys.begin(), keys.end(), name) == keys.end())
        fail(at, key, "unknown key" + did_you_mean(name, keys) + "; " + what + " takes " + joined_words(keys));
      if (!seen.insert(name).second) fail(at, key, "given twice");
      spec_.lines[at] = key.Mark().line + 1;
    }
    if (!path_.empty() && node.Mark().line >= 0) spec_.lines.emplace(path_, node.Mark().line + 1);
  }

  bool has(const std::string& key) const { return node_[key].IsDefined(); }
  YAML::Node node(const std::string& key) const { return node_[key]; }
  std::string at_key(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  void integer(const std::string& key, int64_t& out) const {
    if (!has(key)) return;
    const YAML::Node v = node_[key];
    const std::string* s = plain_scalar(v);
    if (!s || !parse_integer(*s, &out)) fail(at_key(key), v, "expected an integer, got " + describe_node(v));
  }
  void real(const std::string& key, double& out) const {
    if (!has(key)) return;
    const YAML::Node v = node_[key];
    const std::string* s = plain_scalar(v);
    if (!s || !parse_finite(*s, &out)) fail(at_key(key), v, "expected a number, got " + describe_node(v));
  }
  void real(const std::string& key, std::optional<double>& out) const {
    if (!has(key)) return;
    double v = 0;
    real(key, v);
    out = v;
  }
  void boolean(const std::string& key, bool& out) const {
    if (!has(key)) return;
    const YAML::Node v = node_[key];
    const std::string* s = plain_scalar(v);
    if (s && (*s == "true" || *s == "false")) out = *s == "true";
    else fail(at_key(key), v, "expected true or false, got " + describe_node(v));
  }
  // A number, or false for "off" (LayerScale).
  void number_or_off(const std::string& key, std::optional<double>& out) const {
    if (!has(key)) return;
    const YAML::Node v = node_[key];
    const std::string* s = plain_scalar(v);
    double x = 0;
    if (s && *s == "false") out.reset();
    else if (s && parse_finite(*s, &x)) out = x;
    else fail(at_key(key), v, "expected a number (the initial value) or false (none), got " + describe_node(v));
  }
  template <class E, size_t N>
  void choice(const std::string& key, E& out, const fn::Names<E, N>& names) const {
    if (!has(key)) return;
    const YAML::Node v = node_[key];
    std::vector<std::string_view> words;
    for (const auto& [name, value] : names) words.push_back(name);
    const std::string* s = plain_scalar(v);
    for (const auto& [name, value] : names)
      if (s && *s == name) {
        out = value;
        return;
      }
    fail(at_key(key), v,
         "expected one of " + joined_words(words) + ", got " + describe_node(v) + (s ? did_you_mean(*s, words) : ""));
  }
  // A block's token mixer: one of the library's, else one the program registered
  // (models/token_mixers.h).
  void mixer(const std::string& key, BlockSpec& b) const {
    if (!has(key)) return;
    const YAML::Node v = node_[key];
    const std::string* s = plain_scalar(v);
    for (const auto& [name, value] : fn::kMixers)
      if (s && *s == name) {
        b.attn = value;
        return;
      }
    if (s && registered_token_mixer(*s)) {
      b.attn = MixerKind::Registered;
      b.registered_attn = *s;
      return;
    }
    std::vector<std::string> words;
    for (const auto& [name, value] : fn::kMixers) words.emplace_back(name);
    const std::vector<std::string> registered = registered_token_mixers();
    words.insert(words.end(), registered.begin(), registered.end());
    fail(at_key(key), v,
         "expected one of " + joined_words(words) +
             (registered.empty() ? " (or a token mixer the program registers: models/token_mixers.h)"
                                 : " (the last " + std::to_string(registered.size()) + " registered by the program)") +
             ", got " + describe_node(v) + (s ? did_you_mean(*s, words) : ""));
  }
  void required(const std::string& key) const {
    if (!has(key)) fail(path_, node_, "key '" + key + "' is missing");
  }
  // The list under `key`, at most `max` entries long.
  YAML::Node list(const std::string& key, size_t max) const {
    const YAML::Node v = node_[key];
    if (!v.IsSequence()) fail(at_key(key), v, "expected a list, got " + describe_node(v));
    if (v.size() > max)
      fail(at_key(key), v, "at most " + std::to_string(max) + " entries, got " + std::to_string(v.size()));
    return v;
  }

  [[noreturn]] void fail(const std::string& key, const YAML::Node& at, const std::string& message) const {
    if (at.IsDefined() && at.Mark().line >= 0) spec_.lines[key.empty() ? "(file)" : key] = at.Mark().line + 1;
    spec_error(spec_, key.empty() ? "(file)" : key, message);
  }

 private:
  ModelSpec& spec_;
  YAML::Node node_;
  std::string path_;
};

// Per-block keys, timm's names where timm has them.
void read_block(ModelSpec& spec, const YAML::Node& node, const std::string& path, BlockSpec& b) {
  const Mapping m(spec, node, path, "a block",
                  {"repeat", "attn", "num_heads", "attn_dim", "qkv_bias", "local", "mlp_ratio", "layer_scale",
                   "drop_path", "proj_drop", "mlp_drop", "norm_eps"});
  m.required("attn");
  m.integer("repeat", b.repeat);
  m.mixer("attn", b);
  m.integer("num_heads", b.num_heads);
  m.integer("attn_dim", b.attn_dim);
  m.boolean("qkv_bias", b.qkv_bias);
  m.choice("local", b.local, fn::kLocals);
  m.real("mlp_ratio", b.mlp_ratio);
  m.number_or_off("layer_scale", b.layer_scale);
  m.real("drop_path", b.drop_path);
  m.real("proj_drop", b.proj_drop);
  m.real("mlp_drop", b.mlp_drop);
  m.real("norm_eps", b.norm_eps);
}

void read_stage(ModelSpec& spec, const YAML::Node& node, const std::string& path, StageSpec& s) {
  const Mapping m(spec, node, path, "a stage",
                  {"embed_dim", "patch_embed", "patch_size", "pos_embed", "cls_token", "crpe_windows", "blocks"});
  m.required("blocks");
  m.integer("embed_dim", s.embed_dim);
  m.choice("patch_embed", s.patch_embed, fn::kPatchEmbeds);
  m.integer("patch_size", s.patch_size);
  m.choice("pos_embed", s.pos_embed, fn::kPosEmbeds);
  m.boolean("cls_token", s.cls_token);
  if (m.has("crpe_windows")) {
    // {kernel size: heads, ...}
    const YAML::Node w = m.node("crpe_windows");
    const std::string at = m.at_key("crpe_windows");
    if (!w.IsMap() || w.size() == 0 || w.size() > kMaxWindows)
      m.fail(at, w,
             "expected a mapping of 1 to " + std::to_string(kMaxWindows) + " kernel sizes to heads, got " +
                 describe_node(w));
    s.crpe_windows.clear();
    for (const auto& entry : w) {
      int64_t kernel = 0, heads = 0;
      const std::string* k = plain_scalar(entry.first);
      const std::string* h = plain_scalar(entry.second);
      if (!k || !parse_integer(*k, &kernel))
        m.fail(at, entry.first, "expected a kernel size, got " + describe_node(entry.first));
      if (!h || !parse_integer(*h, &heads))
        m.fail(at, entry.second, "expected a number of heads, got " + describe_node(entry.second));
      if (!s.crpe_windows.emplace(kernel, heads).second) m.fail(at, entry.first, "kernel size " + *k + " given twice");
    }
  }
  const YAML::Node blocks = m.list("blocks", kMaxBlockEntries);
  for (size_t i = 0; i < blocks.size(); ++i)
    read_block(spec, blocks[i], m.at_key("blocks") + "[" + std::to_string(i) + "]", s.blocks.emplace_back());
}

void read_parallel(ModelSpec& spec, const YAML::Node& node, ParallelSpec& p) {
  const Mapping m(spec, node, "parallel_blocks", "parallel_blocks",
                  {"repeat", "mlp_ratio", "drop_path", "proj_drop", "mlp_drop", "norm_eps"});
  m.required("repeat");
  m.integer("repeat", p.repeat);
  m.real("mlp_ratio", p.mlp_ratio);
  m.real("drop_path", p.drop_path);
  m.real("proj_drop", p.proj_drop);
  m.real("mlp_drop", p.mlp_drop);
  m.real("norm_eps", p.norm_eps);
  if (p.repeat == 0) p = ParallelSpec{};  // none, as class attention of repeat 0
}

void read_head(ModelSpec& spec, const YAML::Node& node, HeadSpec& h) {
  const Mapping m(spec, node, "head", "the head", {"cls_token", "class_attention", "pool", "norm_eps"});
  m.boolean("cls_token", h.cls_token);
  m.choice("pool", h.pool, fn::kPools);
  m.real("norm_eps", h.norm_eps);
  if (!m.has("class_attention")) return;
  ClassAttentionSpec& c = h.class_attention;
  c.repeat = 2;  // timm's CaiT: depth_token_only=2
  const Mapping ca(spec, m.node("class_attention"), "head.class_attention", "class_attention",
                   {"repeat", "style", "attn", "num_heads", "attn_dim", "qkv_bias", "mlp_ratio", "layer_scale",
                    "proj_drop", "mlp_drop", "tokens_norm", "norm_eps"});
  ca.integer("repeat", c.repeat);
  ca.choice("style", c.style, fn::kStyles);
  ca.choice("attn", c.attn, fn::kClassMixers);
  ca.integer("num_heads", c.num_heads);
  ca.integer("attn_dim", c.attn_dim);
  ca.boolean("qkv_bias", c.qkv_bias);
  ca.real("mlp_ratio", c.mlp_ratio);
  ca.number_or_off("layer_scale", c.layer_scale);
  ca.real("proj_drop", c.proj_drop);
  ca.real("mlp_drop", c.mlp_drop);
  ca.boolean("tokens_norm", c.tokens_norm);
  ca.real("norm_eps", c.norm_eps);
  if (c.repeat == 0) c = ClassAttentionSpec{};  // none: its other keys say nothing (and are not written)
}

void read_root(ModelSpec& spec, const YAML::Node& root) {
  const Mapping m(spec, root, "", "a model file",
                  {"tessera_model", "name", "family", "num_classes", "in_chans", "img_size", "drop_rate",
                   "drop_path_rate", "stages", "parallel_blocks", "head"});
  if (!m.has("tessera_model"))
    m.fail("tessera_model", root, "key 'tessera_model' is missing: a model file starts with `tessera_model: 1`");
  int64_t version = 0;
  m.integer("tessera_model", version);
  if (version != ModelSpec::kVersion)
    m.fail("tessera_model", m.node("tessera_model"),
           "this build reads model files of version " + std::to_string(ModelSpec::kVersion) + ", got " +
               describe_node(m.node("tessera_model")));
  if (m.has("name")) {
    const YAML::Node n = m.node("name");
    if (!n.IsScalar()) m.fail("name", n, "expected a name, got " + describe_node(n));
    spec.name = n.Scalar();
  }
  if (m.has("family")) {
    const YAML::Node n = m.node("family");
    const std::string* s = plain_scalar(n);
    if (!s || std::find(fn::kFamilies.begin(), fn::kFamilies.end(), *s) == fn::kFamilies.end())
      m.fail("family", n,
             "expected one of " + joined_words(fn::kFamilies) + ", got " + describe_node(n) +
                 (s ? did_you_mean(*s, fn::kFamilies) : ""));
    spec.family = *s == "none" ? "" : *s;
  }
  m.integer("num_classes", spec.num_classes);
  m.integer("in_chans", spec.in_chans);
  m.integer("img_size", spec.img_size);
  m.real("drop_rate", spec.drop_rate);
  m.real("drop_path_rate", spec.drop_path_rate);
  m.required("stages");
  const YAML::Node stages = m.list("stages", kMaxStages);
  for (size_t i = 0; i < stages.size(); ++i)
    read_stage(spec, stages[i], "stages[" + std::to_string(i) + "]", spec.stages.emplace_back());
  if (m.has("parallel_blocks")) read_parallel(spec, m.node("parallel_blocks"), spec.parallel_blocks);
  if (m.has("head")) read_head(spec, m.node("head"), spec.head);
}

}  // namespace

ModelSpec read_model_file(const std::string& text, const std::string& source) {
  io::check_untrusted_yaml(text, "model file " + source);  // before yaml-cpp sees it
  ModelSpec spec;
  spec.source = source;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.line >= 0) spec.lines["(file)"] = e.mark.line + 1;
    spec_error(spec, "(file)", "not a valid YAML file: " + e.msg);
  }
  try {
    read_root(spec, root);
  } catch (const YAML::Exception& e) {  // yaml-cpp's own checks while walking nodes
    spec_error(spec, "(file)", "not a valid YAML file: " + e.msg);
  }
  if (spec.name.empty()) {
    const size_t slash = source.find_last_of('/');
    spec.name = source.substr(slash == std::string::npos ? 0 : slash + 1);
    spec.name = spec.name.substr(0, spec.name.find('.'));
  }
  check_model_spec(spec);
  return spec;
}

ModelSpec load_model_file(const std::string& path) {
  return read_model_file(io::read_untrusted_yaml(path, "model file " + path), path);
}

}  // namespace tessera::models
