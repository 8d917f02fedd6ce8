// safetensors reader (mmap + header validation) and atomic writer; format and rules in
// io/safetensors.h. The validation mirrors the reference implementation
// (huggingface/safetensors, safetensors/src/tensor.rs: read_metadata / Metadata::validate).
#include "tessera/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "tessera/autograd/grad_mode.h"
#include "tessera/core/atomic_file.h"
#include "tessera/io/json.h"
#include "tessera/io/mapped_file.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data are little-endian; a big-endian host would need byte swaps");

namespace tessera {

namespace {

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference reader's MAX_HEADER_SIZE
constexpr const char* kMetadataKey = "__metadata__";

// ---- dtypes ------------------------------------------------------------------------------------

struct StDType {
  const char* name;
  unsigned bits;               // F4 and F6 pack several elements per byte
  std::optional<DType> dtype;  // what load() produces, if Tessera has the type
};

// Every dtype string of the format (reference `impl Display for Dtype`).
constexpr StDType kDTypes[] = {
    {"BOOL", 8, DType::Bool},
    {"U8", 8, {}},
    {"I8", 8, {}},
    {"I16", 16, {}},
    {"U16", 16, {}},
    {"F16", 16, DType::Float16},
    {"BF16", 16, DType::BFloat16},
    {"I32", 32, {}},
    {"U32", 32, {}},
    {"F32", 32, DType::Float32},
    {"F64", 64, DType::Float64},
    {"I64", 64, DType::Int64},
    {"U64", 64, {}},
    {"C64", 64, {}},
    {"F8_E5M2", 8, {}},
    {"F8_E4M3", 8, {}},
    {"F8_E8M0", 8, {}},
    {"F8_E4M3FNUZ", 8, {}},
    {"F8_E5M2FNUZ", 8, {}},
    {"F4", 4, {}},
    {"F6_E2M3", 6, {}},
    {"F6_E3M2", 6, {}},
};

const StDType* find_dtype(const std::string& name) {
  for (const StDType& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

const char* st_name(DType dt) {
  for (const StDType& d : kDTypes)
    if (d.dtype == dt) return d.name;
  throw Error(detail::concat("save_safetensors: dtype ", dtype_name(dt), " has no safetensors name"));
}

// "BOOL, F16, ..." of every dtype, or only of those load() supports.
std::string dtype_list(bool loadable_only) {
  std::string s;
  for (const StDType& d : kDTypes)
    if (d.dtype || !loadable_only) s += std::string(s.empty() ? "" : ", ") + d.name;
  return s;
}

// ---- header parsing ----------------------------------------------------------------------------

// Builds error messages "safetensors: '<path>': ..." for one file.
struct Context {
  const std::string& path;
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw Error(detail::concat("safetensors: '", path, "': ", args...));
  }
};

// "an array", "a string", ...
std::string a_kind(json::Kind kind) {
  const std::string name = json::kind_name(kind);
  return (name[0] == 'a' || name[0] == 'o' ? "an " : "a ") + name;
}

uint64_t read_uint(json::Reader& r, const Context& ctx, const std::string& what) {
  const json::Kind kind = r.peek();
  if (kind != json::Kind::Number) ctx.fail(what, " must be a non-negative integer, got ", a_kind(kind));
  const std::string literal(r.read_number());
  uint64_t v = 0;
  switch (json::parse_uint64(literal, v)) {
    case json::IntParse::Ok: return v;
    case json::IntParse::Negative: ctx.fail(what, " is negative (", literal, ")");
    case json::IntParse::NotInteger: ctx.fail(what, " is not an integer (", literal, ")");
    case json::IntParse::Overflow: ctx.fail(what, " does not fit in 64 bits (", literal, ")");
  }
  return v;
}

void expect_kind(json::Reader& r, json::Kind expected, const Context& ctx, const std::string& what) {
  const json::Kind kind = r.peek();
  if (kind != expected) ctx.fail(what, " must be ", a_kind(expected), ", got ", a_kind(kind));
}

// Number of bytes a tensor of `dtype` and `shape` occupies, with every product overflow-checked.
// The product of the non-zero dims must also fit in int64: Tessera's strides are int64 even for a
// tensor with no elements.
uint64_t byte_size(const StDType& dtype, const Shape& shape, const Context& ctx, const std::string& name) {
  int64_t numel = 1, extent = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(extent, d == 0 ? 1 : d, &extent))
      ctx.fail("tensor '", name, "': shape ", shape, " is too large (more than 2^63 elements)");
    numel *= d;  // |numel| <= extent: cannot overflow
  }
  uint64_t bits;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), dtype.bits, &bits))
    ctx.fail("tensor '", name, "': shape ", shape, " of ", dtype.name, " is too large");
  if (bits % 8 != 0)
    ctx.fail("tensor '", name, "': ", numel, " elements of ", dtype.name, " (", dtype.bits,
             " bits each) do not fill whole bytes");
  return bits / 8;
}

SafetensorsTensorInfo parse_entry(json::Reader& r, const Context& ctx, const std::string& name, uint64_t buffer_size) {
  expect_kind(r, json::Kind::Object, ctx, "tensor '" + name + "'");
  SafetensorsTensorInfo info;
  const StDType* dtype = nullptr;
  bool has_shape = false, has_offsets = false;
  r.begin_object();
  std::string field;
  while (r.next_member(field)) {
    const std::string what = "tensor '" + name + "': \"" + field + "\"";
    auto once = [&](bool seen) {
      if (seen) ctx.fail(what, " appears twice");
    };
    if (field == "dtype") {
      once(dtype != nullptr);
      expect_kind(r, json::Kind::String, ctx, what);
      info.dtype_name = r.read_string();
      dtype = find_dtype(info.dtype_name);
      if (!dtype)
        ctx.fail("tensor '", name, "': unknown dtype \"", info.dtype_name,
                 "\" (the format's dtypes: ", dtype_list(false), ")");
      info.dtype = dtype->dtype;
    } else if (field == "shape") {
      once(has_shape);
      has_shape = true;
      expect_kind(r, json::Kind::Array, ctx, what);
      r.begin_array();
      while (r.next_item()) {
        const uint64_t d = read_uint(r, ctx, what + "[" + std::to_string(info.shape.size()) + "]");
        if (d > static_cast<uint64_t>(INT64_MAX)) ctx.fail(what, " has a dimension too large (", d, ")");
        info.shape.push_back(static_cast<int64_t>(d));
      }
    } else if (field == "data_offsets") {
      once(has_offsets);
      has_offsets = true;
      expect_kind(r, json::Kind::Array, ctx, what);
      r.begin_array();
      std::vector<uint64_t> offsets;
      while (r.next_item()) {
        if (offsets.size() == 2) ctx.fail(what, " must hold exactly 2 integers [begin, end], got more");
        offsets.push_back(read_uint(r, ctx, what + "[" + std::to_string(offsets.size()) + "]"));
      }
      if (offsets.size() != 2) ctx.fail(what, " must hold exactly 2 integers [begin, end], got ", offsets.size());
      info.data_begin = offsets[0];
      info.data_end = offsets[1];
    } else {
      r.skip_value();  // unknown fields are ignored, as serde does by default
    }
  }
  for (auto [present, field_name] :
       {std::pair{dtype != nullptr, "dtype"}, std::pair{has_shape, "shape"}, std::pair{has_offsets, "data_offsets"}})
    if (!present) ctx.fail("tensor '", name, "': missing field \"", field_name, "\"");

  const uint64_t nbytes = byte_size(*dtype, info.shape, ctx, name);
  if (info.data_end < info.data_begin)
    ctx.fail("tensor '", name, "': data_offsets [", info.data_begin, ", ", info.data_end, "] end before they begin");
  if (info.data_end - info.data_begin != nbytes)
    ctx.fail("tensor '", name, "': data_offsets [", info.data_begin, ", ", info.data_end, "] hold ",
             info.data_end - info.data_begin, " bytes, but ", dtype->name, " ", info.shape, " needs ", nbytes);
  if (info.data_end > buffer_size)
    ctx.fail("tensor '", name, "': data_offsets [", info.data_begin, ", ", info.data_end,
             "] extend past the end of the data buffer (", buffer_size, " bytes); is the file truncated?");
  return info;
}

std::map<std::string, std::string> parse_metadata(json::Reader& r, const Context& ctx) {
  expect_kind(r, json::Kind::Object, ctx, kMetadataKey);
  std::map<std::string, std::string> metadata;
  r.begin_object();
  std::string key;
  while (r.next_member(key)) {
    const std::string what = std::string(kMetadataKey) + "[\"" + key + "\"]";
    expect_kind(r, json::Kind::String, ctx, what);
    if (!metadata.emplace(key, r.read_string()).second) ctx.fail(what, " appears twice");
  }
  return metadata;
}

// Suggestions for an unknown name: the names ending most like it (a missing or extra prefix such
// as "module." is the usual mistake), up to `count`, in file order among equals.
std::string similar_names(const std::vector<std::string>& names, const std::string& wanted, size_t count) {
  auto common_suffix = [&](const std::string& s) {
    size_t n = 0;
    while (n < s.size() && n < wanted.size() && s[s.size() - 1 - n] == wanted[wanted.size() - 1 - n]) ++n;
    return n;
  };
  std::vector<std::pair<size_t, size_t>> ranked;  // (-suffix, index) sorts best first
  for (size_t i = 0; i < names.size(); ++i) ranked.emplace_back(SIZE_MAX - common_suffix(names[i]), i);
  const size_t shown = std::min(count, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + shown, ranked.end());
  std::string s;
  for (size_t k = 0; k < shown; ++k) s += (k ? ", '" : "'") + names[ranked[k].second] + "'";
  return s;
}

// ---- writing -----------------------------------------------------------------------------------

void check_utf8(const std::string& s, const std::string& path, const char* what) {
  TS_CHECK(json::invalid_utf8_offset(s) == std::string_view::npos, "save_safetensors: '", path, "': ", what,
           " is not valid UTF-8 (byte ", json::invalid_utf8_offset(s), ")");
}

}  // namespace

// ---- SafetensorsReader -------------------------------------------------------------------------

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  const Context ctx{path_};
  mapping_ = std::make_shared<const MappedFile>(path_, "safetensors");
  const unsigned char* bytes = mapping_->data();
  const uint64_t file_size = mapping_->size();
  if (file_size < 8)
    ctx.fail("the file is ", file_size, " bytes, too short for the 8-byte header length of a safetensors file");

  uint64_t header_size;
  std::memcpy(&header_size, bytes, 8);  // little-endian host (static_assert above)
  if (header_size > kMaxHeaderSize)
    ctx.fail("header length ", header_size, " exceeds the format's limit of ", kMaxHeaderSize,
             " bytes; not a safetensors file?");
  if (header_size > file_size - 8)
    ctx.fail("header length ", header_size, " exceeds the ", file_size - 8,
             " bytes after the length field; the file is truncated or not a safetensors file");
  data_ = bytes + 8 + header_size;
  const uint64_t buffer_size = file_size - 8 - header_size;

  std::vector<SafetensorsTensorInfo> entries;
  std::vector<std::string> names;
  try {
    json::Reader r(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_size));
    expect_kind(r, json::Kind::Object, ctx, "the header");
    r.begin_object();
    std::string key;
    bool has_metadata = false;
    while (r.next_member(key)) {
      if (key == kMetadataKey) {
        if (has_metadata) ctx.fail("\"", kMetadataKey, "\" appears twice");
        has_metadata = true;
        metadata_ = parse_metadata(r, ctx);
        continue;
      }
      if (!index_.emplace(key, entries.size()).second) ctx.fail("tensor '", key, "' appears twice in the header");
      entries.push_back(parse_entry(r, ctx, key, buffer_size));
      names.push_back(key);
    }
    r.finish();
  } catch (const json::SyntaxError& e) {
    ctx.fail("the header is not valid JSON: ", e.reason(), " at byte ", e.offset(), " of the header (file offset ",
             8 + e.offset(), ")");
  }

  // The tensors, in offset order, must tile the data buffer exactly.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].data_begin, entries[a].data_end) <
           std::pair(entries[b].data_begin, entries[b].data_end);
  });
  uint64_t end = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const SafetensorsTensorInfo& e = entries[order[k]];
    if (k == 0 && e.data_begin != 0)
      ctx.fail("tensor '", names[order[k]], "': data_offsets [", e.data_begin, ", ", e.data_end,
               "] leave a gap: the first tensor must start at byte 0 of the data buffer");
    if (e.data_begin != end)
      ctx.fail("tensor '", names[order[k]], "': data_offsets [", e.data_begin, ", ", e.data_end, "] ",
               e.data_begin < end ? "overlap" : "leave a gap after", " the previous tensor '", names[order[k - 1]],
               "', which ends at byte ", end);
    end = e.data_end;
  }
  if (end != buffer_size)
    ctx.fail("the data buffer is ", buffer_size, " bytes but the tensors end at byte ", end,
             " (trailing bytes are not allowed)");

  index_.clear();
  for (size_t i : order) {
    index_.emplace(names[i], names_.size());
    names_.push_back(std::move(names[i]));
    infos_.push_back(std::move(entries[i]));
  }
}

const SafetensorsTensorInfo& SafetensorsReader::info(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end())
    Context{path_}.fail("no tensor named '", name, "'; the file has ", names_.size(), " tensor",
                        names_.size() == 1 ? "" : "s",
                        names_.empty() ? std::string() : ", e.g. " + similar_names(names_, name, 5));
  return infos_[it->second];
}

Tensor SafetensorsReader::load(const std::string& name) const {
  const SafetensorsTensorInfo& info = this->info(name);
  const Context ctx{path_};
  if (!info.dtype)
    ctx.fail("tensor '", name, "' has dtype ", info.dtype_name,
             ", which Tessera cannot load (supported: ", dtype_list(true), ")");
  const unsigned char* src = data_ + info.data_begin;
  const size_t nbytes = info.data_end - info.data_begin;
  if (*info.dtype == DType::Bool) {  // any other byte would be an invalid C++ bool
    const auto* bad = std::find_if(src, src + nbytes, [](unsigned char b) { return b > 1; });
    if (bad != src + nbytes)
      ctx.fail("tensor '", name, "': BOOL element ", bad - src, " is stored as byte ", int{*bad}, " (expected 0 or 1)");
  }
  Tensor t = Tensor::empty(info.shape, *info.dtype);
  if (nbytes > 0) std::memcpy(t.raw_data(), src, nbytes);
  MappedFile::release_pages(src, nbytes);
  return t;
}

SafetensorsReader open_safetensors(const std::string& path) { return SafetensorsReader(path); }

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path) {
  const SafetensorsReader reader(path);
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(reader.names().size());
  for (const std::string& name : reader.names()) out.emplace_back(name, reader.load(name));
  return out;
}

// ---- save_safetensors --------------------------------------------------------------------------

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Validate everything and build the header before the temporary file exists.
  std::string header = "{";
  if (!metadata.empty()) {
    json::append_quoted(header, kMetadataKey);
    header += ":{";
    for (const auto& [key, value] : metadata) {
      check_utf8(key, path, "a metadata key");
      check_utf8(value, path, ("metadata[\"" + key + "\"]").c_str());
      if (header.back() != '{') header += ',';
      json::append_quoted(header, key);
      header += ':';
      json::append_quoted(header, value);
    }
    header += '}';
  }
  std::unordered_map<std::string, size_t> seen;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    TS_CHECK(t.defined(), "save_safetensors: '", path, "': tensor '", name, "' (#", i, ") is undefined");
    TS_CHECK(name != kMetadataKey, "save_safetensors: '", path, "': \"", kMetadataKey,
             "\" is reserved and cannot name a tensor");
    check_utf8(name, path, ("tensor name #" + std::to_string(i)).c_str());
    const auto [it, fresh] = seen.emplace(name, i);
    TS_CHECK(fresh, "save_safetensors: '", path, "': duplicate tensor name '", name, "' (#", it->second, " and #", i,
             ")");
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (header.size() > 1) header += ',';
    json::append_quoted(header, name);
    header += ":{\"dtype\":\"";
    header += st_name(t.dtype());
    header += "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d) header += ',';
      header += std::to_string(t.size(d));
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  header += '}';
  header.resize((header.size() + 7) / 8 * 8, ' ');  // the data buffer starts 8-byte aligned

  AtomicFileWriter file(path, "save_safetensors");
  const uint64_t header_size = header.size();
  file.write(&header_size, 8);  // little-endian host
  file.write(header.data(), header.size());
  NoGradGuard no_grad;  // the host copies below are not part of any graph
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu()).contiguous();  // one tensor's copy at a time
    if (host.numel() > 0) file.write(host.raw_data(), static_cast<size_t>(host.numel()) * host.element_size());
  }
  file.commit();
}

}  // namespace tessera
