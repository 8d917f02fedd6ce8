// The module-by-module view of a forward pass; see tools/cli/summary.h.
#include "tools/cli/summary.h"

#include <algorithm>
#include <unordered_set>

#include "tessera/io/json.h"
#include "tessera/nn/module.h"
#include "tessera/ops/ops.h"

namespace tessera::cli {

namespace {

// The module tree as rows (depth-first, registration order) with the module of each row. A module
// met again under a later path is a shared row and is not descended into: its subtree is listed
// at its first path.
void list_modules(const nn::Module& m, const std::string& path, const std::string& name, int depth,
                  std::unordered_set<const nn::Module*>& seen, std::vector<SummaryRow>& rows,
                  std::vector<const nn::Module*>& modules) {
  SummaryRow row;
  row.path = path;
  row.name = name;
  row.type = m.type_name();
  row.depth = depth;
  row.shared = !seen.insert(&m).second;
  rows.push_back(row);
  modules.push_back(&m);
  if (row.shared) return;
  for (const auto& [child_name, child] : m.named_children())
    list_modules(*child, path.empty() ? child_name : path + "." + child_name, child_name, depth + 1, seen, rows,
                 modules);
}

// Own parameters at each module's first path (each tensor once), then the subtree sums.
void count_parameters(const std::vector<const nn::Module*>& modules, std::vector<SummaryRow>& rows) {
  std::unordered_set<const TensorImpl*> counted;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].shared) continue;
    for (const auto& [name, t] : modules[i]->named_parameters())
      if (name.find('.') == std::string::npos && counted.insert(t.impl_ptr().get()).second)
        rows[i].own_params += t.numel();
  }
  for (size_t i = rows.size(); i-- > 0;) {  // rows[i]'s subtree is the run of deeper rows after it
    rows[i].params = rows[i].own_params;
    for (size_t j = i + 1; j < rows.size() && rows[j].depth > rows[i].depth; ++j) rows[i].params += rows[j].own_params;
  }
}

// Attributes each observed call to a row: the shallowest row of that module under the row of the
// innermost call in progress (the caller's own child, even for a module registered at several
// paths). MACs are read from the pass's FlopCounter at entry and exit.
class PassObserver : public nn::ForwardObserver {
 public:
  PassObserver(std::vector<SummaryRow>& rows, const std::vector<const nn::Module*>& modules, const FlopCounter& counter)
      : rows_(rows), modules_(modules), counter_(counter) {}

  void enter(const nn::Module& m) override {
    frames_.push_back({find_row(frames_.empty() ? -1 : frames_.back().row, m), counter_.macs(), 0});
  }

  void exit(const nn::Module&, const std::vector<Tensor>& outputs) noexcept override {
    const Frame f = frames_.back();
    frames_.pop_back();
    const int64_t macs = counter_.macs() - f.macs_at_entry;
    if (f.row < 0) return;  // a module outside the tree: its work stays with the caller
    if (!frames_.empty()) frames_.back().child_macs += macs;
    SummaryRow& row = rows_[f.row];
    ++row.calls;
    row.macs += macs;
    row.self_macs += macs - f.child_macs;
    if (outputs.empty()) return;  // left by an exception
    row.output_shapes.clear();
    for (const Tensor& t : outputs) row.output_shapes.push_back(t.shape());
  }

 private:
  struct Frame {
    int row;
    int64_t macs_at_entry, child_macs;
  };

  int find_row(int parent, const nn::Module& m) const {
    const size_t begin = parent < 0 ? 0 : parent + 1;
    int best = -1;
    for (size_t i = begin; i < rows_.size(); ++i) {
      if (parent >= 0 && rows_[i].depth <= rows_[parent].depth) break;  // past the caller's subtree
      if (modules_[i] == &m && (best < 0 || rows_[i].depth < rows_[best].depth)) best = static_cast<int>(i);
    }
    return best;
  }

  std::vector<SummaryRow>& rows_;
  const std::vector<const nn::Module*>& modules_;
  const FlopCounter& counter_;
  std::vector<Frame> frames_;
};

void write_shape(json::Writer& w, const Shape& shape) {
  w.begin_array();
  for (int64_t d : shape) w.value(d);
  w.end_array();
}

}  // namespace

std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string shapes_text(const std::vector<Shape>& shapes) {
  if (shapes.empty()) return "--";
  std::string out;
  for (const Shape& s : shapes) out += (out.empty() ? "" : " ") + shape_str(s);
  return out;
}

ModelSummary summarize(models::Model& model, const Tensor& input) {
  ModelSummary s;
  s.input_shape = input.shape();
  std::vector<const nn::Module*> modules;
  std::unordered_set<const nn::Module*> seen;
  list_modules(model, "", model.type_name(), 0, seen, s.rows, modules);
  count_parameters(modules, s.rows);
  s.params = model.num_parameters();
  for (const Tensor& p : model.parameters()) s.trainable_params += p.requires_grad() ? p.numel() : 0;
  NoGradGuard no_grad;
  FlopCounter counter;
  PassObserver observer(s.rows, modules, counter);
  {
    nn::ObserveForward observe(observer);
    model.forward(input);
  }
  s.macs = counter.macs();
  for (size_t i = s.rows.size(); i-- > 0;) {  // containers that were not called: their children's work
    SummaryRow& r = s.rows[i];
    if (r.calls > 0 || r.shared) continue;
    for (size_t j = i + 1; j < s.rows.size() && s.rows[j].depth > r.depth; ++j)
      if (s.rows[j].depth == r.depth + 1) r.macs += s.rows[j].macs;
  }
  return s;
}

std::string summary_text(const ModelSummary& s, int max_depth) {
  std::vector<const SummaryRow*> shown;
  for (const SummaryRow& r : s.rows)
    if (max_depth <= 0 || r.depth <= max_depth) shown.push_back(&r);
  auto label = [](const SummaryRow& r) {
    std::string text = std::string(2 * r.depth, ' ') + r.name;
    if (r.depth > 0) text += " (" + r.type + ")";
    if (r.calls > 1) text += " x" + std::to_string(r.calls);
    return text;
  };
  size_t label_width = 12, shape_width = 12;
  for (const SummaryRow* r : shown) {
    label_width = std::max(label_width, label(*r).size());
    shape_width = std::max(shape_width, shapes_text(r->output_shapes).size());
  }
  auto line = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d) {
    std::string out = a + std::string(label_width + 2 - a.size(), ' ') + b;
    out += std::string(shape_width + 2 - b.size(), ' ');
    out += std::string(c.size() < 12 ? 12 - c.size() : 0, ' ') + c;
    out += std::string(d.size() < 16 ? 16 - d.size() : 0, ' ') + d + "\n";
    return out;
  };
  std::string out = line("Module (type)", "Output shape", "Params", "MACs");
  out += std::string(label_width + shape_width + 32, '=') + "\n";
  for (const SummaryRow* r : shown)
    out += line(label(*r), shapes_text(r->output_shapes), r->shared ? "(shared)" : grouped(r->params),
                r->calls || r->macs ? grouped(r->macs) : "--");
  out += std::string(label_width + shape_width + 32, '=') + "\n";
  char totals[512];
  std::snprintf(
      totals, sizeof totals,
      "Total params: %s (trainable: %s)\nTotal MACs: %s (%.3f G; multiply-accumulates, what the papers "
      "call FLOPs)\nInput: %s\n(--: not called as a module in this pass; its work counts in its parent's MACs)\n",
      grouped(s.params).c_str(), grouped(s.trainable_params).c_str(), grouped(s.macs).c_str(), s.macs / 1e9,
      shape_str(s.input_shape).c_str());
  return out + totals;
}

std::string summary_json(const ModelSummary& s, const std::string& model_name) {
  json::Writer w;
  w.begin_object().key("model").value(model_name).key("input_shape");
  write_shape(w, s.input_shape);
  w.key("params").value(s.params).key("trainable_params").value(s.trainable_params).key("flops").value(s.macs);
  w.key("modules").begin_array();
  for (const SummaryRow& r : s.rows) {
    w.begin_object().key("path").value(r.path).key("type").value(r.type).key("depth").value(r.depth);
    w.key("shared").value(r.shared).key("calls").value(r.calls).key("output_shapes").begin_array();
    for (const Shape& shape : r.output_shapes) write_shape(w, shape);
    w.end_array().key("params").value(r.params).key("own_params").value(r.own_params);
    w.key("macs").value(r.macs).key("self_macs").value(r.self_macs).end_object();
  }
  w.end_array().end_object();
  return w.str();
}

}  // namespace tessera::cli
