// The reading list of `tessera explain`: per paper (a family, or ViT for plain self-attention), the
// equations of it that the page draws, written out, with the Tessera source files that implement each.
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

// The entries of the papers of `families` ("xcit", "cait", "coat", "ufo_vit", "vit"), in that order,
// each entry once (XCiT and CaiT share class attention).
std::vector<Reading> reading_list(const std::vector<std::string>& families);
// The paper's full title; several papers' titles joined by "; ".
std::string paper_title(const std::string& family);
std::string paper_titles(const std::vector<std::string>& families);

// The reading entry a block of `type` implements ("XCABlock" -> "eq-xca"); "" when none.
std::string reading_anchor(const std::string& block_type);

}  // namespace tessera::cli
