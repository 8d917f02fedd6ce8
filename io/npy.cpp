// .npy reading and writing; see io/npy.h.
#include "tessera/io/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "tessera/core/atomic_file.h"
#include "tessera/core/error.h"

namespace tessera::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* code;
  DType dtype;
};
constexpr Descr kDescrs[] = {{"<f4", DType::Float32}, {"<f8", DType::Float64}, {"<i8", DType::Int64}};

// numpy's own limit (numpy.lib.format, max_header_size): real headers are about 100 bytes, and a
// bound keeps a hostile header from costing more than a glance.
constexpr size_t kMaxHeaderLen = 10000;

// Finds 'key': value in the header dict; value is a quoted string, True/False, or a tuple.
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const auto space = [&](size_t i) {
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
    return i;
  };
  for (const char quote : {'\'', '"'}) {
    const std::string quoted = quote + key + quote;
    for (size_t at = header.find(quoted); at != std::string::npos; at = header.find(quoted, at + 1)) {
      size_t i = space(at + quoted.size());
      if (i >= header.size() || header[i] != ':') continue;
      i = space(i + 1);
      if (i >= header.size()) break;
      const char c = header[i];
      size_t end = std::string::npos;
      if (c == '\'' || c == '"') end = header.find(c, i + 1);
      else if (c == '(') end = header.find(')', i + 1);
      else if (header.compare(i, 4, "True") == 0) end = i + 3;
      else if (header.compare(i, 5, "False") == 0) end = i + 4;
      if (end != std::string::npos) return header.substr(i, end + 1 - i);
    }
  }
  throw Error(detail::concat("read_npy: ", path, ": header has no '", key, "' entry: ", header));
}

Shape parse_shape(const std::string& tuple, const std::string& path) {
  Shape shape;
  const std::string inner = tuple.substr(1, tuple.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    const size_t comma = inner.find(',', pos);
    std::string item = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(" "));
    item.erase(item.find_last_not_of(" ") + 1);
    if (!item.empty()) {
      TS_CHECK(item.find_first_not_of("0123456789") == std::string::npos && item.size() <= 18, "read_npy: ", path,
               ": bad dimension '", item, "' in shape ", tuple);
      shape.push_back(std::stoll(item));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return shape;
}

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::string& path) {
  TS_CHECK(bytes.size() >= 10 && std::memcmp(bytes.data(), kMagic, 6) == 0, "read_npy: ", path,
           " is not a .npy file (expected the magic \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  TS_CHECK(major >= 1 && major <= 3, "read_npy: ", path, ": unsupported format version ", major);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else {
    TS_CHECK(bytes.size() >= 12, "read_npy: ", path, ": truncated: ", bytes.size(),
             " bytes, fewer than the 12 of a version ", major, " preamble");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    start = 12;
  }
  TS_CHECK(header_len <= kMaxHeaderLen, "read_npy: ", path, ": the header claims ", header_len,
           " bytes, more than numpy's limit of ", kMaxHeaderLen, "; not a .npy file numpy would read");
  TS_CHECK(header_len <= bytes.size() - start, "read_npy: ", path, ": truncated: the header claims ", header_len,
           " bytes, the file has ", bytes.size() - start, " after the preamble");
  const std::string header(bytes.substr(start, header_len));
  const std::string descr = header_field(header, "descr", path);
  const std::string code = descr.substr(1, descr.size() - 2);
  const Descr* found = nullptr;
  for (const Descr& d : kDescrs)
    if (code == d.code) found = &d;
  TS_CHECK(found != nullptr, "read_npy: ", path, ": dtype '", code,
           "' is not supported (expected little-endian float32 '<f4', float64 '<f8' or int64 '<i8')");
  TS_CHECK(header_field(header, "fortran_order", path) == "False", "read_npy: ", path,
           ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  const Shape shape = parse_shape(header_field(header, "shape", path), path);
  // The size the header claims, checked against the bytes present before anything is allocated:
  // a 100-byte file claiming petabytes is "truncated", not "out of memory".
  // Strides are int64 even for an empty array, so the non-zero dimensions must multiply within it.
  int64_t extent = 1, numel = 1;
  uint64_t claimed = 0;
  for (int64_t d : shape) {
    TS_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent), "read_npy: ", path, ": shape ", shape,
             " is too large (more than 2^63 elements); the file has ", bytes.size(), " bytes");
    numel *= d;  // |numel| <= extent
  }
  TS_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel), uint64_t{found->dtype == DType::Float32 ? 4u : 8u},
                                   &claimed),
           "read_npy: ", path, ": shape ", shape, " of dtype ", code, " claims more than 2^64 bytes; the file has ",
           bytes.size());
  const uint64_t present = bytes.size() - start - header_len;
  TS_CHECK(present >= claimed, "read_npy: ", path, ": truncated: shape ", shape, " of dtype ", code, " needs ", claimed,
           " data bytes, the file has ", present);
  TS_CHECK(present == claimed, "read_npy: ", path, ": expected ", claimed, " data bytes for shape ", shape,
           " and dtype ", code, ", the file has ", present, " (", present - claimed, " trailing bytes)");
  Tensor t = Tensor::empty(shape, found->dtype);
  if (claimed > 0) std::memcpy(t.raw_data(), bytes.data() + start + header_len, claimed);
  return t;
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), "read_npy: cannot open ", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_npy(bytes, path);
}

void write_npy(const std::string& path, const Tensor& t_in) {
  TS_CHECK(t_in.defined(), "write_npy: ", path, ": undefined tensor");
  const Descr* found = nullptr;
  for (const Descr& d : kDescrs)
    if (t_in.dtype() == d.dtype) found = &d;
  TS_CHECK(found != nullptr, "write_npy: ", path, ": dtype ", dtype_name(t_in.dtype()),
           " has no .npy code here (float32, float64 or int64)");
  const Tensor t = t_in.to(Device::cpu()).contiguous();
  std::string shape = "(";
  for (int64_t s : t.shape()) shape += std::to_string(s) + ", ";
  if (t.dim() > 1) shape.resize(shape.size() - 2);
  if (t.dim() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header =
      std::string("{'descr': '") + found->code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');  // magic + version + length + header + '\n' = k * 64
  header += '\n';
  std::string bytes(kMagic, 6);
  bytes += {1, 0};  // format version 1.0
  bytes += {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  bytes += header;
  bytes.append(static_cast<const char*>(t.raw_data()), static_cast<size_t>(t.numel()) * t.element_size());
  write_file_atomically(path, bytes);
}

}  // namespace tessera::io
