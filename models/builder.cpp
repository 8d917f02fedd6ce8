#include "tessera/models/builder.h"

#include <cmath>
#include <functional>
#include <set>

#include "tessera/models/kinds.h"
#include "tessera/models/model_file.h"
#include "tessera/models/vision_transformer.h"

namespace tessera::models {

namespace {

// Applies ModelOptions::model_kwargs: the model offers its fields by name, and a key that no field
// took is an error listing the ones it takes.
class ModelKwargs {
 public:
  // Bounds every value so that a product of two (embed_dim * mlp_ratio) still fits in int64 and
  // every conversion to an integer is defined: 2^24, far beyond any real architecture (the spec's
  // checks then bound each field more tightly).
  static constexpr int64_t kMaxValue = int64_t{1} << 24;

  explicit ModelKwargs(const std::map<std::string, double>& kwargs) : kwargs_(kwargs) {}
  void integer(const std::string& key, const std::function<void(int64_t)>& set) {
    offered_.push_back(key);
    auto it = kwargs_.find(key);
    if (it == kwargs_.end()) return;
    TS_CHECK(it->second >= 1 && it->second <= static_cast<double>(kMaxValue) && std::floor(it->second) == it->second,
             "create_model: model kwarg ", key, " must be an integer in [1, ", kMaxValue, "], got ", it->second);
    set(static_cast<int64_t>(it->second));
    used_.insert(key);
  }
  void real(const std::string& key, const std::function<void(double)>& set) {
    offered_.push_back(key);
    auto it = kwargs_.find(key);
    if (it == kwargs_.end()) return;
    TS_CHECK(it->second > 0 && it->second <= static_cast<double>(kMaxValue), "create_model: model kwarg ", key,
             " must be in (0, ", kMaxValue, "], got ", it->second);
    set(it->second);
    used_.insert(key);
  }
  void check_all_used() const {
    for (const auto& [key, value] : kwargs_) {
      if (used_.count(key)) continue;
      std::string offered;
      for (const std::string& k : offered_) offered += (offered.empty() ? "" : ", ") + k;
      throw Error("create_model: unknown model kwarg '" + key + "' for this model; it takes " + offered);
    }
  }

 private:
  const std::map<std::string, double>& kwargs_;
  std::vector<std::string> offered_;
  std::set<std::string> used_;
};

// Every attention's fields (the blocks' and the class attention's), with their keys.
template <class Fn>
void for_each_attention(ModelSpec& s, Fn fn) {
  for (size_t i = 0; i < s.stages.size(); ++i)
    for (size_t j = 0; j < s.stages[i].blocks.size(); ++j) {
      BlockSpec& b = s.stages[i].blocks[j];
      fn("stages[" + std::to_string(i) + "].blocks[" + std::to_string(j) + "]", b.num_heads, b.mlp_ratio, b.attn_dim,
         takes_attn_dim(b.attn), b.layer_scale);
    }
  ClassAttentionSpec& c = s.head.class_attention;
  if (c.repeat > 0)
    fn("head.class_attention", c.num_heads, c.mlp_ratio, c.attn_dim, takes_attn_dim(c.attn), c.layer_scale);
}

// timm's model_kwargs on a spec: what a model of one stage or of several takes (model.h).
void apply_kwargs(ModelSpec& s, const std::map<std::string, double>& kwargs) {
  ModelKwargs k(kwargs);
  auto mark = [&](const std::string& key) { s.overridden.insert(key); };
  auto attentions = [&](auto set) {
    for_each_attention(s,
                       [&](const std::string& key, int64_t& heads, double& ratio, int64_t& attn_dim, bool inner_width,
                           std::optional<double>&) { set(key, heads, ratio, attn_dim, inner_width); });
  };
  auto heads = [&](int64_t v) {
    attentions([&](const std::string& key, int64_t& h, double&, int64_t&, bool) { h = v, mark(key + ".num_heads"); });
  };
  if (s.stages.size() == 1) {
    StageSpec& st = s.stages[0];
    if (st.blocks.size() == 1)
      k.integer("depth", [&](int64_t v) { st.blocks[0].repeat = v, mark("stages[0].blocks[0].repeat"); });
    k.integer("embed_dim", [&](int64_t v) { st.embed_dim = v, mark("stages[0].embed_dim"); });
    k.integer("num_heads", heads);
    k.real("mlp_ratio", [&](double v) {
      attentions([&](const std::string& key, int64_t&, double& r, int64_t&, bool) { r = v, mark(key + ".mlp_ratio"); });
    });
    // attn_dim: the inner width of the attentions that have one (UFO-ViT's).
    bool any_inner_width = false;
    attentions(
        [&](const std::string&, int64_t&, double&, int64_t&, bool inner_width) { any_inner_width |= inner_width; });
    if (any_inner_width)
      k.integer("attn_dim", [&](int64_t v) {
        attentions([&](const std::string& key, int64_t&, double&, int64_t& e, bool inner_width) {
          if (inner_width) e = v, mark(key + ".attn_dim");
        });
      });
  } else {
    k.integer("num_heads", heads);
    k.integer("parallel_depth", [&](int64_t v) { s.parallel_blocks.repeat = v, mark("parallel_blocks.repeat"); });
  }
  k.check_all_used();
}

}  // namespace

void apply_options(ModelSpec& s, const ModelOptions& o) {
  TS_CHECK(o.num_classes >= 0, "create_model: num_classes must be positive (0: the model file's), got ", o.num_classes);
  TS_CHECK(o.in_chans >= 0, "create_model: in_chans must be positive (0: the model file's), got ", o.in_chans);
  auto set = [&](const std::string& key, auto& field, auto value) {
    field = value;
    s.overridden.insert(key);
  };
  if (o.num_classes > 0) set("num_classes", s.num_classes, o.num_classes);
  if (o.in_chans > 0) set("in_chans", s.in_chans, o.in_chans);
  if (o.img_size > 0) set("img_size", s.img_size, o.img_size);
  if (o.patch_size > 0 && !s.stages.empty()) set("stages[0].patch_size", s.stages[0].patch_size, o.patch_size);
  if (o.drop_rate != 0) set("drop_rate", s.drop_rate, o.drop_rate);
  if (o.drop_path_rate != 0) set("drop_path_rate", s.drop_path_rate, o.drop_path_rate);
  if (o.layer_scale_init >= 0) {
    bool any = false;
    for_each_attention(s, [&](const std::string& key, int64_t&, double&, int64_t&, bool, std::optional<double>& ls) {
      if (ls) set(key + ".layer_scale", ls, o.layer_scale_init), any = true;
    });
    TS_CHECK(any, "create_model: ", s.name, " has no LayerScale (no block sets layer_scale), got layer_scale_init ",
             o.layer_scale_init);
  }
  apply_kwargs(s, o.model_kwargs);
}

std::shared_ptr<Model> build_model(const ModelSpec& spec) {
  check_model_spec(spec);
  if (std::shared_ptr<Model> view = family_view(spec)) return view;
  return std::make_shared<VisionTransformer>(spec);
}

}  // namespace tessera::models
