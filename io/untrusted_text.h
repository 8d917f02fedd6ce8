// Checks on a YAML text that Tessera did not write itself (a model file, a -c config, a run's
// args.yaml), made before yaml-cpp parses it, so that a hostile or broken file costs at most a few
// MB and a fraction of a second and is refused with its file, line and byte: the parser builds a
// node per entry (a 50 MB file took 7 GB and half a minute before its entries were counted) and
// recurses per level of nesting, and what it accepts must also be storable in a checkpoint's
// metadata, which is UTF-8 (docs/models.md, "The format").
#pragma once
#include <cstddef>
#include <string>

namespace tessera::io {

inline constexpr size_t kMaxYamlBytes = size_t{1} << 20;  // a real model file is a few KB
inline constexpr int kMaxYamlNesting = 32;                // a model file nests 6-8 levels

// Throws tessera::Error "<what>: ..." naming the line and byte offset where `text` is not valid
// UTF-8, holds a NUL byte, or nests deeper than kMaxYamlNesting (indentation, "- " entries and
// flow brackets), and the size where it is longer than kMaxYamlBytes.
void check_untrusted_yaml(const std::string& text, const std::string& what);

// The text of the file at `path`, refused before it is read when it is longer than kMaxYamlBytes.
// Its content is checked where it is parsed (check_untrusted_yaml: the model-file and config readers).
std::string read_untrusted_yaml(const std::string& path, const std::string& what);

}  // namespace tessera::io
