// The page of `tessera explain`: one HTML file with everything inlined (pictures as PNG data URIs,
// charts as SVG, one <style>, a few lines of script that only add controls), so it opens offline
// and reads with scripts off: the blocks are <details> elements, every head is shown.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/version.h"
#include "tools/cli/attention_picture.h"
#include "tools/cli/explain.h"
#include "tools/cli/explain_papers.h"
#include "tools/cli/html_figures.h"

namespace tessera::cli {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// A CSS colour of the heat ramp at `v` in [0, 1].
std::string css_heat(double v) {
  const auto c = heat_color(v);
  return "rgb(" + std::to_string(std::lround(255 * c[0])) + "," + std::to_string(std::lround(255 * c[1])) + "," +
         std::to_string(std::lround(255 * c[2])) + ")";
}

std::string style(const std::string& view_uri) {
  std::string ramp;
  for (int i = 0; i <= 8; ++i) ramp += (i ? "," : "") + css_heat(i / 8.0);
  return "<style>\n"
         "body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1180px;padding:0 18px 40px;color:#1d1d1f}\n"
         "h1{font-size:26px;margin:22px 0 4px}h2{margin-top:34px;border-bottom:2px solid #ddd}\n"
         "nav a{margin-right:14px}table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left}\n"
         "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}tr:nth-child(even){background:#f4f4f6}\n"
         ".note{background:#fff6d8;border-left:4px solid #e0b000;padding:6px 12px}\n"
         ".grid{display:flex;flex-wrap:wrap;gap:10px}.cell{width:150px;font-size:12px}\n"
         ".ov{position:relative;width:144px;height:144px;background:url(" +
         view_uri +
         ") center/100% 100%}\n"
         ".ov img{position:absolute;left:0;top:0;width:100%;height:100%;opacity:" +
         fmt("%.2f", kHeatWeight) +
         "}\n"
         ".ov .q{position:absolute;border:2px solid #fff;outline:1px solid #000;box-sizing:border-box}\n"
         ".mx{width:144px;height:144px;image-rendering:pixelated;display:block}\n"
         "details.block{border:1px solid #ccc;border-radius:6px;margin:10px 0;padding:4px 12px}\n"
         "details.block summary{cursor:pointer;font-weight:600}figure{margin:10px 0}figcaption{margin-bottom:6px}\n"
         ".legend{display:inline-block;width:160px;height:10px;vertical-align:middle;background:linear-gradient(to "
         "right," +
         ramp +
         ")}\n"
         ".chart text{font-size:12px}pre.eq{background:#f4f4f6;padding:8px 12px;white-space:pre-wrap}\n"
         "#controls{position:sticky;top:0;background:#fff;padding:6px 0;z-index:1}\n"
         "</style>\n";
}

// The controls exist only when scripts run: a head selector and buttons that open or close every
// block. Without them the page shows every head of every block.
std::string script(int64_t heads) {
  return "<script>\n"
         "(function(){var c=document.getElementById('controls');var s=document.createElement('select');\n"
         "s.add(new Option('all heads',''));for(var h=0;h<" +
         std::to_string(heads) +
         ";h++)s.add(new Option('head '+h,''+h));\n"
         "s.onchange=function(){document.querySelectorAll('[data-head]').forEach(function(e){"
         "e.style.display=(s.value===''||e.getAttribute('data-head')===s.value)?'':'none';});};\n"
         "function btn(t,open){var b=document.createElement('button');b.textContent=t;b.onclick=function(){"
         "document.querySelectorAll('details.block').forEach(function(d){d.open=open;});};return b;}\n"
         "c.append('Show: ',s,' ',btn('open all blocks',true),' ',btn('close all blocks',false));})();\n"
         "</script>\n";
}

std::string legend() {
  return "<p><span class=\"legend\"></span> low → high; each map is coloured from its own minimum to its own "
         "maximum (the numbers are in --json).</p>\n";
}

// One map over the image: the heat picture at patch-grid resolution, scaled by the browser over the
// model's view; `query` (>= 0) outlines that patch.
std::string over_image(const Tensor& map, const std::string& alt, int64_t query = -1) {
  std::string s =
      "<div class=\"ov\"><img src=\"" + png_data_uri(heat_image(map)) + "\" alt=\"" + html_escape(alt) + "\">";
  if (query >= 0) {
    const int64_t rows = map.size(0), cols = map.size(1);
    const double h = 100.0 / static_cast<double>(rows), w = 100.0 / static_cast<double>(cols);
    s += "<div class=\"q\" style=\"left:" + fmt("%.3f", w * static_cast<double>(query % cols)) +
         "%;top:" + fmt("%.3f", h * static_cast<double>(query / cols)) + "%;width:" + fmt("%.3f", w) +
         "%;height:" + fmt("%.3f", h) + "%\"></div>";
  }
  return s + "</div>";
}

std::string matrix(const Tensor& map, const std::string& alt) {
  return "<img class=\"mx\" src=\"" + png_data_uri(heat_image(map)) + "\" alt=\"" + html_escape(alt) + "\">";
}

std::string figure_html(const Figure& f, const std::string& block) {
  std::string s = "<figure><figcaption><b>" + html_escape(f.title) + "</b><br>" + html_escape(f.caption) +
                  "</figcaption>\n<div class=\"grid\">";
  for (size_t i = 0; i < f.maps.size(); ++i) {
    const std::string alt = block + " " + f.key + " " + f.labels[i];
    const int64_t head = static_cast<int64_t>(i) / std::max<int64_t>(1, f.maps_per_head);
    s += "<div class=\"cell\" data-head=\"" + std::to_string(head) + "\">";
    s += f.over_image ? over_image(f.maps[i], alt, f.query_patch) : matrix(f.maps[i], alt);
    s += html_escape(f.labels[i]) + "</div>";
  }
  return s + "</div></figure>\n";
}

std::string anchor(const std::string& path) { return "block-" + path; }

// ---- the six sections ---------------------------------------------------------------------------

std::string input_section(const Explanation& e) {
  std::string s = "<section id=\"input\"><h2>1. The input and the answer</h2>\n<div class=\"grid\">";
  s += "<div><img src=\"" + png_data_uri(e.view) + "\" alt=\"the image as the model sees it\" width=\"" +
       std::to_string(std::max<int64_t>(224, e.view.width)) + "\"><br>" + html_escape(e.image) +
       ", as the model sees it: " + std::to_string(e.view.width) + "x" + std::to_string(e.view.height) +
       " after resize and center crop, normalisation undone</div>\n";
  s += "<div><table><tr><th>class</th><th class=\"n\">probability</th><th></th></tr>";
  for (const auto& [name, p] : e.top5)
    s += "<tr><td>" + html_escape(name) + "</td><td class=\"n\">" + fmt("%.2f%%", 100 * p) + "</td><td><svg width=\"" +
         std::to_string(static_cast<int>(std::lround(2 + 200 * p))) +
         "\" height=\"10\"><rect width=\"100%\" height=\"10\" fill=\"#4a78b5\"></rect></svg></td></tr>";
  s += "</table></div></div>\n";
  if (e.weights.empty())
    s += "<p class=\"note\">This model is <b>untrained</b> (random initial weights): its predictions are noise and "
         "its maps show what the architecture computes, not what a trained model has learned.</p>\n";
  return s + "</section>\n";
}

std::string tree_section(const Explanation& e) {
  std::string s = "<section id=\"tree\"><h2>2. The model as a tree</h2>\n<p>" + grouped(e.summary.params) +
                  " parameters, " + grouped(e.summary.macs) +
                  " multiply-accumulates (MACs, what the papers call "
                  "FLOPs) for one " +
                  std::to_string(e.img_size) + "x" + std::to_string(e.img_size) +
                  " image. Blocks link to their pictures below and to the paper's equations.</p>\n";
  auto table = [&](int max_depth) {
    std::string t =
        "<table><tr><th>module</th><th>type</th><th>output shape</th><th class=\"n\">parameters</th>"
        "<th class=\"n\">MACs</th><th>equations</th></tr>";
    for (const SummaryRow& r : e.summary.rows) {
      if (max_depth > 0 && r.depth > max_depth) continue;
      const bool is_block =
          std::any_of(e.blocks.begin(), e.blocks.end(), [&](const BlockView& b) { return b.path == r.path; });
      t += "<tr><td style=\"padding-left:" + std::to_string(10 + 14 * r.depth) + "px\">" +
           (is_block ? "<a href=\"#" + anchor(r.path) + "\">" + html_escape(r.path) + "</a>"
                     : html_escape(r.depth ? r.path : e.model)) +
           "</td><td>" + html_escape(r.type) + "</td><td>" + html_escape(shapes_text(r.output_shapes)) +
           "</td><td class=\"n\">" + (r.shared ? "(shared)" : grouped(r.params)) + "</td><td class=\"n\">" +
           grouped(r.macs) + "</td><td>";
      const std::string eq = is_block ? reading_anchor(r.type) : "";
      if (!eq.empty()) t += "<a href=\"#" + eq + "\">" + html_escape(eq.substr(3)) + "</a>";
      t += "</td></tr>";
    }
    return t + "</table>\n";
  };
  s += table(2);
  s += "<details><summary>Every module</summary>" + table(0) + "</details>\n";
  return s + "</section>\n";
}

// The image cut into its first stage's patch grid: each square becomes one token.
std::string patch_grid(const Explanation& e) {
  const auto first =
      std::find_if(e.blocks.begin(), e.blocks.end(), [](const BlockView& b) { return !b.token_norms.empty(); });
  if (first == e.blocks.end()) return "";
  const int64_t side = first->token_norms.front().size(0), patch = e.img_size / side;
  // Lines in CSS pixels of the 224-pixel picture (a scaled viewBox would scale their width too).
  std::string lines;
  for (int64_t i = 1; i < side; ++i) {
    const std::string at = fmt("%.2f", 224.0 * static_cast<double>(i) / static_cast<double>(side));
    lines += "<line x1=\"" + at + "\" y1=\"0\" x2=\"" + at + "\" y2=\"224\"/><line x1=\"0\" y1=\"" + at +
             "\" x2=\"224\" y2=\"" + at + "\"/>";
  }
  return "<div class=\"grid\"><div class=\"ov\" style=\"width:224px;height:224px\"><svg width=\"224\" "
         "height=\"224\" stroke=\"#fff\" stroke-opacity=\"0.8\" stroke-width=\"1\" "
         "style=\"position:absolute;left:0;top:0\">" +
         lines + "</svg></div><p>The model cuts its " + std::to_string(e.img_size) + "x" + std::to_string(e.img_size) +
         " input into " + std::to_string(side) + "x" + std::to_string(side) + " = " + std::to_string(side * side) +
         " patches of " + std::to_string(patch) + "x" + std::to_string(patch) +
         " pixels; each becomes one token, a vector that the blocks below update in turn (the residual "
         "stream).</p></div>\n";
}

std::string tokens_section(const Explanation& e) {
  std::string s = "<section id=\"tokens\"><h2>3. Tokens through the network</h2>\n" + patch_grid(e) +
                  "<p>How much each block changes the residual stream: ‖out − in‖ / ‖in‖ over its tokens (for a "
                  "class-attention block, over the class token it updates). Where the bars are long the network works "
                  "hardest.</p>\n";
  // Two charts: the class token starts from one learned vector, so its first update is often many
  // times its size and would flatten the trunk's bars.
  std::vector<Bar> trunk, class_token;
  for (const BlockView& b : e.blocks)
    for (size_t k = 0; k < b.relative_updates.size(); ++k)
      (b.token_norms.empty() ? class_token : trunk)
          .push_back({b.path + (b.relative_updates.size() > 1 ? " (stage " + std::to_string(k + 2) + ")" : ""),
                      b.relative_updates[k],
                      {}});
  s += svg_bar_chart(trunk, "") + "\n";
  if (!class_token.empty())
    s += "<p>The class-attention blocks, on the class token:</p>\n" + svg_bar_chart(class_token, "") + "\n";
  s += "<p>The norm of each patch token after each block, over the image: which patches carry the most "
       "signal.</p>\n" +
       legend() + "<div class=\"grid\">";
  for (const BlockView& b : e.blocks)
    for (size_t k = 0; k < b.token_norms.size(); ++k) {
      const std::string label = b.path + (b.token_norms.size() > 1 ? " (stage " + std::to_string(k + 2) + ")" : "");
      s += "<div class=\"cell\"><a href=\"#" + anchor(b.path) + "\">" +
           over_image(b.token_norms[k], label + " token norms") + html_escape(label) + "</a></div>";
    }
  return s + "</div></section>\n";
}

std::string attention_section(const Explanation& e) {
  std::string s =
      "<section id=\"attention\"><h2>4. Attention as " +
      html_escape(e.families.size() == 1 && e.families[0] != "own" ? paper_title(e.families[0]) + " defines it"
                                                                   : "its papers define it") +
      "</h2>\n";
  if (!e.note.empty()) s += "<p>" + html_escape(e.note) + "</p>\n";
  s += legend();
  for (const BlockView& b : e.blocks) {
    s += "<details class=\"block\" id=\"" + anchor(b.path) + "\" open><summary>" + html_escape(b.path) + " · " +
         html_escape(b.type) + " · " + html_escape(b.equation) + "</summary>\n<p>Relative update " +
         fmt("%.3f", b.relative_updates.empty() ? 0.0 : b.relative_updates.front()) + ". Implemented in <code>" +
         html_escape(b.source) + "</code>";
    if (const std::string eq = reading_anchor(b.type); !eq.empty())
      s += "; equations: <a href=\"#" + eq + "\">reading list</a>";
    s += ".</p>\n";
    for (const Figure& f : b.figures) s += figure_html(f, b.path);
    s += "</details>\n";
  }
  return s + "</section>\n";
}

std::string compute_section(const Explanation& e) {
  std::string s = "<section id=\"compute\"><h2>5. Where the compute goes</h2>\n";
  if (e.compute.empty()) return s + "<p>Not computed.</p></section>\n";
  const ComputeAtSize& base = e.compute.front();
  std::vector<Bar> stages;
  for (const auto& [name, macs] : base.per_stage)
    if (macs > 0) stages.push_back({name, static_cast<double>(macs) / 1e6, {}});
  s += "<p>MACs per part of the model at " + std::to_string(base.img_size) + "x" + std::to_string(base.img_size) +
       ":</p>\n" + svg_bar_chart(stages, "MMAC") + "\n";
  std::vector<Bar> params;
  for (const SummaryRow& r : e.summary.rows)
    if (r.depth == 1 && !r.shared && r.params > 0) params.push_back({r.path, static_cast<double>(r.params) / 1e6, {}});
  s += "<p>Parameters per part:</p>\n" + svg_bar_chart(params, "M") + "\n";
  s += "<p>Attention (the attention modules, their projections included) against the MLPs as the image grows. "
       "<span style=\"color:#c0392b\">■</span> attention <span style=\"color:#4a78b5\">■</span> MLP "
       "<span style=\"color:#999\">■</span> the rest.</p>\n";
  std::vector<Bar> sizes;
  for (const ComputeAtSize& c : e.compute) {
    const double other = static_cast<double>(c.total - c.attention - c.mlp);
    sizes.push_back({std::to_string(c.img_size) + " px",
                     static_cast<double>(c.total) / 1e6,
                     {{static_cast<double>(c.attention) / 1e6, "#c0392b"},
                      {static_cast<double>(c.mlp) / 1e6, "#4a78b5"},
                      {other / 1e6, "#999"}}});
  }
  s += svg_bar_chart(sizes, "MMAC") + "\n";
  s += "<table><tr><th class=\"n\">image</th><th class=\"n\">MACs</th><th class=\"n\">attention</th><th "
       "class=\"n\">MLP</th><th class=\"n\">attention's share</th></tr>";
  for (const ComputeAtSize& c : e.compute)
    s += "<tr><td class=\"n\">" + std::to_string(c.img_size) + "</td><td class=\"n\">" + grouped(c.total) +
         "</td><td class=\"n\">" + grouped(c.attention) + "</td><td class=\"n\">" + grouped(c.mlp) +
         "</td><td class=\"n\">" + fmt("%.1f%%", c.total ? 100.0 * static_cast<double>(c.attention) / c.total : 0.0) +
         "</td></tr>";
  s += "</table>\n";
  const ComputeAtSize& last = e.compute.back();
  if (base.attention > 0 && base.mlp > 0) {
    const double pixels = std::pow(static_cast<double>(last.img_size) / static_cast<double>(base.img_size), 2);
    s += "<p>From " + std::to_string(base.img_size) + " to " + std::to_string(last.img_size) + " px the tokens grow " +
         fmt("%.2f", pixels) + "x; the attention's MACs grow " +
         fmt("%.2f", static_cast<double>(last.attention) / static_cast<double>(base.attention)) + "x and the MLPs' " +
         fmt("%.2f", static_cast<double>(last.mlp) / static_cast<double>(base.mlp)) +
         "x. Linear attention (XCiT, CoaT, UFO-ViT) grows as the tokens do; CaiT's token self-attention grows "
         "with their square.</p>\n";
  }
  return s + "</section>\n";
}

std::string reading_section(const Explanation& e) {
  std::string s = "<section id=\"reading\"><h2>6. Reading list</h2>\n<p>" + html_escape(paper_titles(e.families)) +
                  ". The equations of the blocks this page drew, as the papers write them, and where Tessera computes "
                  "each.</p>\n";
  for (const Reading& r : reading_list(e.families))
    s += "<h3 id=\"" + r.id + "\">" + html_escape(r.title) + "</h3>\n<pre class=\"eq\">" + html_escape(r.equation) +
         "</pre>\n<p>Source: <code>" + html_escape(r.sources) + "</code></p>\n";
  return s + "</section>\n";
}

}  // namespace

std::string explanation_html(const Explanation& e) {
  int64_t heads = 0;
  for (const BlockView& b : e.blocks)
    for (const Figure& f : b.figures)
      heads = std::max<int64_t>(heads, static_cast<int64_t>(f.maps.size()) / std::max<int64_t>(1, f.maps_per_head));
  const std::string title = "How " + e.model + " sees " + e.image;
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
      html_escape(title) + "</title>\n" + style(png_data_uri(e.view)) + "</head><body>\n";
  s += "<h1>" + html_escape(title) + "</h1>\n<p>" + html_escape(paper_titles(e.families)) +
       ". Weights: " + html_escape(e.weights.empty() ? "none (untrained)" : e.weights) +
       ". Made by tessera " TESSERA_VERSION_STRING " (<code>tessera explain</code>).</p>\n";
  s += "<nav><a href=\"#input\">1. input</a><a href=\"#tree\">2. tree</a><a href=\"#tokens\">3. tokens</a>"
       "<a href=\"#attention\">4. attention</a><a href=\"#compute\">5. compute</a><a href=\"#reading\">6. reading</a>"
       "</nav>\n<div id=\"controls\"></div>\n";
  s += input_section(e) + tree_section(e) + tokens_section(e) + attention_section(e) + compute_section(e) +
       reading_section(e);
  s += script(heads) + "</body></html>\n";
  return s;
}

}  // namespace tessera::cli
