// `tessera explain --json`: the numbers of the page without its pictures, for people who plot
// them themselves. Maps are nested arrays [rows][cols] in the model's float32 values.
#include "tessera/io/json.h"
#include "tools/cli/explain.h"

namespace tessera::cli {

namespace {

void write_map(json::Writer& w, const Tensor& map) {
  const Tensor m = map.contiguous();
  const float* p = m.data<float>();
  w.begin_array();
  for (int64_t r = 0; r < m.size(0); ++r) {
    w.begin_array();
    for (int64_t c = 0; c < m.size(1); ++c) w.value(static_cast<double>(p[r * m.size(1) + c]));
    w.end_array();
  }
  w.end_array();
}

void write_numbers(json::Writer& w, const std::vector<double>& v) {
  w.begin_array();
  for (double x : v) w.value(x);
  w.end_array();
}

}  // namespace

std::string explanation_json(const Explanation& e) {
  json::Writer w;
  // "family": the one family of a named model, "hybrid" for a model file that mixes several.
  w.begin_object().key("model").value(e.model);
  w.key("family").value(e.families.size() == 1 ? e.families[0] : std::string("hybrid")).key("families").begin_array();
  for (const std::string& f : e.families) w.value(f);
  w.end_array().key("weights");
  if (e.weights.empty()) {
    w.null();
  } else {
    w.value(e.weights);
  }
  w.key("image").value(e.image).key("img_size").value(e.img_size);
  w.key("params").value(e.summary.params).key("macs").value(e.summary.macs);
  w.key("top5").begin_array();
  for (const auto& [name, p] : e.top5)
    w.begin_object().key("class").value(name).key("probability").value(p).end_object();
  w.end_array();
  if (e.query_patch >= 0) w.key("query_patch").value(e.query_patch);
  w.key("blocks").begin_array();
  for (const BlockView& b : e.blocks) {
    w.begin_object().key("path").value(b.path).key("type").value(b.type).key("equation").value(b.equation);
    w.key("source").value(b.source).key("relative_update");
    write_numbers(w, b.relative_updates);
    w.key("token_norms").begin_array();
    for (const Tensor& t : b.token_norms) write_map(w, t);
    w.end_array().key("figures").begin_object();
    for (const Figure& f : b.figures) {
      w.key(f.key).begin_object().key("title").value(f.title).key("over_image").value(f.over_image);
      w.key("maps_per_head").value(f.maps_per_head);
      if (f.query_patch >= 0) w.key("query_patch").value(f.query_patch);
      w.key("labels").begin_array();
      for (const std::string& l : f.labels) w.value(l);
      w.end_array().key("maps").begin_array();
      for (const Tensor& m : f.maps) write_map(w, m);
      w.end_array();
      for (const auto& [name, values] : f.numbers) {
        w.key(name);
        write_numbers(w, values);
      }
      w.end_object();
    }
    w.end_object().end_object();
  }
  w.end_array().key("compute").begin_array();
  for (const ComputeAtSize& c : e.compute) {
    w.begin_object().key("img_size").value(c.img_size).key("macs").value(c.total);
    w.key("attention_macs").value(c.attention).key("mlp_macs").value(c.mlp).key("per_stage").begin_object();
    for (const auto& [name, macs] : c.per_stage) w.key(name).value(macs);
    w.end_object().end_object();
  }
  w.end_array();
  return w.end_object().str();
}

}  // namespace tessera::cli
