#include "tessera/models/registry.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "tessera/models/cait.h"
#include "tessera/models/coat.h"
#include "tessera/models/ufo_vit.h"
#include "tessera/models/xcit.h"

namespace tessera::models {

namespace {

using Factory = ModelFactory;

double or_default(double value, double fallback) { return value < 0 ? fallback : value; }
int64_t or_default(int64_t value, int64_t fallback) { return value <= 0 ? fallback : value; }

// Applies ModelOptions::model_kwargs to a config: each family offers its fields by name, and a
// key that no field took is an error listing the ones the family takes.
class ModelKwargs {
 public:
  // Bounds every value so that a product of two (embed_dim * mlp_ratio) still fits in int64 and
  // every conversion to an integer is defined: 2^24, far beyond any real architecture.
  static constexpr int64_t kMaxValue = int64_t{1} << 24;

  explicit ModelKwargs(const std::map<std::string, double>& kwargs) : kwargs_(kwargs) {}
  void integer(const std::string& key, int64_t& field) {
    offered_.push_back(key);
    auto it = kwargs_.find(key);
    if (it == kwargs_.end()) return;
    TS_CHECK(it->second >= 1 && it->second <= static_cast<double>(kMaxValue) && std::floor(it->second) == it->second,
             "create_model: model kwarg ", key, " must be an integer in [1, ", kMaxValue, "], got ", it->second);
    field = static_cast<int64_t>(it->second);
    used_.insert(key);
  }
  void real(const std::string& key, double& field) {
    offered_.push_back(key);
    auto it = kwargs_.find(key);
    if (it == kwargs_.end()) return;
    TS_CHECK(it->second > 0 && it->second <= static_cast<double>(kMaxValue), "create_model: model kwarg ", key,
             " must be in (0, ", kMaxValue, "], got ", it->second);
    field = it->second;
    used_.insert(key);
  }
  void check_all_used() const {
    for (const auto& [key, value] : kwargs_) {
      if (used_.count(key)) continue;
      std::string offered;
      for (const std::string& k : offered_) offered += (offered.empty() ? "" : ", ") + k;
      throw Error("create_model: unknown model kwarg '" + key + "' for this family; it takes " + offered);
    }
  }

 private:
  const std::map<std::string, double>& kwargs_;
  std::vector<std::string> offered_;
  std::set<std::string> used_;
};

// The architecture fields XCiT, CaiT and UFO-ViT share (timm's argument names); the overloads
// below add or replace a family's own.
template <class Config>
void offer_fields(Config& c, ModelKwargs& k) {
  k.integer("depth", c.depth);
  k.integer("embed_dim", c.embed_dim);
  k.integer("num_heads", c.num_heads);
  k.real("mlp_ratio", c.mlp_ratio);
}
void offer_fields(UfoVitConfig& c, ModelKwargs& k) {
  offer_fields<UfoVitConfig>(c, k);
  k.integer("attn_dim", c.attn_dim);
}
void offer_fields(CoatConfig& c, ModelKwargs& k) {
  k.integer("num_heads", c.num_heads);
  k.integer("parallel_depth", c.parallel_depth);
}

// The options every family's config takes the same way; model_kwargs last, so they override the
// variant's fields.
template <class Config>
void apply_common(Config& c, const ModelOptions& o) {
  c.num_classes = o.num_classes;
  c.in_chans = o.in_chans;
  c.drop_rate = o.drop_rate;
  c.drop_path_rate = o.drop_path_rate;
  ModelKwargs kwargs(o.model_kwargs);
  offer_fields(c, kwargs);
  kwargs.check_all_used();
}

// XCiT variants: Table 1 of the paper / timm's registry (README sizes nano..large).
void add_xcit(std::map<std::string, Factory>& registry) {
  struct Size {
    const char* name;
    int64_t dim, heads;
    bool tokens_norm;
    std::vector<int64_t> depths;
  };
  const Size sizes[] = {{"nano", 128, 4, false, {12}},
                        {"tiny", 192, 4, true, {12, 24}},
                        {"small", 384, 8, true, {12, 24}},
                        {"medium", 512, 8, true, {24}},
                        {"large", 768, 16, true, {24}}};
  for (const Size& s : sizes)
    for (int64_t depth : s.depths)
      for (int64_t patch : {16, 8})
        for (int64_t img : {224, 384}) {
          std::string name = "xcit_" + std::string(s.name) + "_" + std::to_string(depth) + "_p" +
                             std::to_string(patch) + "_" + std::to_string(img);
          registry[name] = [=](const ModelOptions& o) {
            XcitConfig c;
            c.embed_dim = s.dim;
            c.num_heads = s.heads;
            c.depth = depth;
            c.tokens_norm = s.tokens_norm;
            c.patch_size = or_default(o.patch_size, patch);
            c.img_size = or_default(o.img_size, img);
            c.eta = or_default(o.layer_scale_init, depth == 12 ? 1.0 : 1e-5);
            apply_common(c, o);
            return std::make_shared<Xcit>(c);
          };
        }
}

// CaiT variants (Table 3; timm's names carry the training resolution).
void add_cait(std::map<std::string, Factory>& registry) {
  struct Variant {
    const char* name;
    int64_t dim, depth, heads, img;
    double init_values;
  };
  const Variant variants[] = {{"cait_xxs24_224", 192, 24, 4, 224, 1e-5}, {"cait_xxs24_384", 192, 24, 4, 384, 1e-5},
                              {"cait_xxs36_224", 192, 36, 4, 224, 1e-5}, {"cait_xxs36_384", 192, 36, 4, 384, 1e-5},
                              {"cait_xs24_384", 288, 24, 6, 384, 1e-5},  {"cait_s24_224", 384, 24, 8, 224, 1e-5},
                              {"cait_s24_384", 384, 24, 8, 384, 1e-5},   {"cait_s36_384", 384, 36, 8, 384, 1e-6},
                              {"cait_m36_384", 768, 36, 16, 384, 1e-6},  {"cait_m48_448", 768, 48, 16, 448, 1e-6}};
  for (const Variant& v : variants)
    registry[v.name] = [=](const ModelOptions& o) {
      CaitConfig c;
      c.embed_dim = v.dim;
      c.depth = v.depth;
      c.num_heads = v.heads;
      c.img_size = or_default(o.img_size, v.img);
      c.patch_size = or_default(o.patch_size, int64_t{16});
      c.init_values = or_default(o.layer_scale_init, v.init_values);
      apply_common(c, o);
      return std::make_shared<Cait>(c);
    };
}

// UFO-ViT variants (Table 1; the project's definition in docs/ufo_vit.md). The paper trains with drop-path 0.05 / 0.1 / 0.15 / 0.25
// (Table 2); like the other families, options.drop_path_rate sets it (default 0).
void add_ufo_vit(std::map<std::string, Factory>& registry) {
  struct Variant {
    const char* name;
    int64_t dim, attn_dim, heads, depth;
    double init_values;
  };
  const Variant variants[] = {{"ufo_vit_t", 192, 96, 4, 24, 1e-5},
                              {"ufo_vit_s", 384, 128, 8, 12, 1.0},
                              {"ufo_vit_m", 384, 128, 8, 24, 1e-5},
                              {"ufo_vit_b", 512, 128, 8, 24, 1e-5}};
  for (const Variant& v : variants)
    registry[v.name] = [=](const ModelOptions& o) {
      UfoVitConfig c;
      c.embed_dim = v.dim;
      c.attn_dim = v.attn_dim;
      c.num_heads = v.heads;
      c.depth = v.depth;
      c.img_size = or_default(o.img_size, int64_t{224});
      c.patch_size = or_default(o.patch_size, int64_t{16});
      c.layer_scale_init = or_default(o.layer_scale_init, v.init_values);
      apply_common(c, o);
      return std::make_shared<UfoVit>(c);
    };
}

// CoaT variants (Table 1 of the paper, timm's coat.py): 8 heads, patch 4; the non-Lite models add 6
// parallel blocks.
void add_coat(std::map<std::string, Factory>& registry) {
  struct Variant {
    const char* name;
    std::array<int64_t, 4> dims, depths;
    int64_t parallel;
    std::array<double, 4> mlp_ratios;
    int64_t img;
  };
  const Variant variants[] = {{"coat_tiny", {152, 152, 152, 152}, {2, 2, 2, 2}, 6, {4, 4, 4, 4}, 224},
                              {"coat_mini", {152, 216, 216, 216}, {2, 2, 2, 2}, 6, {4, 4, 4, 4}, 224},
                              {"coat_small", {152, 320, 320, 320}, {2, 2, 2, 2}, 6, {4, 4, 4, 4}, 224},
                              {"coat_lite_tiny", {64, 128, 256, 320}, {2, 2, 2, 2}, 0, {8, 8, 4, 4}, 224},
                              {"coat_lite_mini", {64, 128, 320, 512}, {2, 2, 2, 2}, 0, {8, 8, 4, 4}, 224},
                              {"coat_lite_small", {64, 128, 320, 512}, {3, 4, 6, 3}, 0, {8, 8, 4, 4}, 224},
                              {"coat_lite_medium", {128, 256, 320, 512}, {3, 6, 10, 8}, 0, {4, 4, 4, 4}, 224},
                              {"coat_lite_medium_384", {128, 256, 320, 512}, {3, 6, 10, 8}, 0, {4, 4, 4, 4}, 384}};
  for (const Variant& v : variants)
    registry[v.name] = [=](const ModelOptions& o) {
      TS_CHECK(o.patch_size <= 0 || o.patch_size == 4, "create_model: CoaT uses patch size 4, got ", o.patch_size);
      TS_CHECK(o.layer_scale_init < 0, "create_model: CoaT has no layer scale, got layer_scale_init ",
               o.layer_scale_init);
      CoatConfig c;
      c.embed_dims = v.dims;
      c.serial_depths = v.depths;
      c.parallel_depth = v.parallel;
      c.mlp_ratios = v.mlp_ratios;
      c.img_size = or_default(o.img_size, v.img);
      apply_common(c, o);
      return std::make_shared<Coat>(c);
    };
}

// The four families, then whatever programs register (register_model); guarded by a mutex because
// a program may register from several threads' static initialisers.
struct Registry {
  Registry() {
    add_xcit(factories);
    add_cait(factories);
    add_coat(factories);
    add_ufo_vit(factories);
  }
  std::mutex mutex;
  std::map<std::string, ModelFactory> factories;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_model(const std::string& name, ModelFactory factory) {
  TS_CHECK(!name.empty() && name.find_first_of(" \t\n=,") == std::string::npos, "register_model: '", name,
           "' is not a usable model name (no spaces, '=' or ',')");
  TS_CHECK(static_cast<bool>(factory), "register_model: the factory for '", name, "' is empty");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  TS_CHECK(r.factories.emplace(name, std::move(factory)).second, "register_model: a model named '", name,
           "' is already registered");
}

std::shared_ptr<Model> create_model(const std::string& name, const ModelOptions& options) {
  ModelFactory factory;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(name);
    if (it == r.factories.end()) {
      std::string similar;
      const std::string family = name.substr(0, name.find('_'));
      for (const auto& [n, f] : r.factories)
        if (n.rfind(family, 0) == 0 && similar.size() < 200) similar += (similar.empty() ? "" : ", ") + n;
      throw Error("create_model: unknown model '" + name + "'" +
                  (similar.empty() ? std::string(" (`tessera models` lists the names)") : "; similar: " + similar));
    }
    factory = it->second;
  }
  TS_CHECK(options.num_classes > 0, "create_model: num_classes must be positive, got ", options.num_classes);
  std::shared_ptr<Model> model = factory(options);
  TS_CHECK(model != nullptr, "create_model: the factory of '", name, "' returned no model");
  model->to(options.device);
  return model;
}

std::vector<std::string> model_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [n, f] : r.factories) names.push_back(n);
  return names;
}

}  // namespace tessera::models
