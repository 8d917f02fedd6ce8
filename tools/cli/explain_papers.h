// The reading list of `tessera explain`: per family, the equations of its paper that the page
// draws, written out, with the Tessera source files that implement each.
#pragma once
#include <string>
#include <vector>

namespace tessera::cli {

struct Reading {
  std::string id;        // the page anchor ("eq-xca")
  std::string title;     // "Cross-covariance attention (XCiT Eq. 1, §3.2)"
  std::string equation;  // plain text with Unicode symbols
  std::string sources;   // "nn/xca.cpp, ops/xca_attention_map.h"
};

// The entries of a family ("xcit", "cait", "coat", "ufo_vit"); the paper's full title first.
const std::vector<Reading>& reading_list(const std::string& family);
std::string paper_title(const std::string& family);

// The reading entry a block of `type` implements ("XCABlock" -> "eq-xca"); "" when none.
std::string reading_anchor(const std::string& block_type);

}  // namespace tessera::cli
