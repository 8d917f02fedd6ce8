// safetensors I/O (io/safetensors.h) and its JSON parser (io/json.h): round trips of every dtype
// from non-contiguous views, byte-exact header layout, files written by the Python reference
// writer (tests/data, made by tools/make_safetensors_fixture.py), rejection of corrupt files with
// clear errors (including every truncation and every single-bit flip of a header), and the
// atomicity of save_safetensors under failures.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gradcheck.h"
#include "tessera/io/json.h"
#include "temp_dir.h"
#include "tessera/io/safetensors.h"

using namespace tessera;
namespace fs = std::filesystem;
using Catch::Contains;
using Bytes = std::string;
using Named = std::vector<std::pair<std::string, Tensor>>;

using testing::TempDir;

namespace {

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Bytes le64(uint64_t v) {
  Bytes b(8, '\0');
  std::memcpy(b.data(), &v, 8);  // the test hosts are little-endian, as the library asserts
  return b;
}

// A safetensors file from a header text and a data buffer.
Bytes st_bytes(const std::string& header, const Bytes& data) { return le64(header.size()) + header + data; }

// The raw bytes of a tensor's elements in row-major order.
Bytes raw(const Tensor& t) {
  Tensor c = t.contiguous();
  return Bytes(static_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()) * c.element_size());
}

Bytes floats(std::initializer_list<float> values) {
  Bytes b;
  for (float v : values) b.append(reinterpret_cast<const char*>(&v), 4);
  return b;
}

void check_same(const Tensor& loaded, const Tensor& original) {
  CHECK(loaded.dtype() == original.dtype());
  CHECK(loaded.shape() == original.shape());
  // (core's is_contiguous() says false for shapes like [2, 0]; only the layout of elements matters)
  CHECK((loaded.is_contiguous() || loaded.numel() == 0));
  CHECK(loaded.strides() == contiguous_strides(loaded.shape()));
  CHECK(loaded.device() == Device::cpu());
  CHECK(raw(loaded) == raw(original));
}

// Some tensors of every dtype, most of them non-contiguous views.
Named sample_tensors() {
  Tensor bools = from_vector(std::vector<int64_t>{1, 0, 0, 1, 1, 0}, {2, 3}).to(DType::Bool);
  Tensor halves = (arange(0.0, 12.0, 1.0) / 3.0).reshape({4, 3});
  Tensor big = from_vector(std::vector<int64_t>{-(int64_t{1} << 62), 5, -1, 7, int64_t{1} << 40, 9}, {6});
  Tensor f64 = (arange(0.0, 12.0, 1.0, DType::Float64) / 7.0).reshape({3, 4});
  return {
      {"f32.permuted", (arange(0.0, 24.0, 1.0) - 11.5).reshape({2, 3, 4}).permute({2, 0, 1})},
      {"f64.transposed", f64.t()},
      {"f64.requires_grad", f64.detach().set_requires_grad(true).narrow(1, 1, 2)},
      {"i64.strided", big.slice(0, 0, 6, 2)},
      {"bf16.transposed", halves.to(DType::BFloat16).t()},
      {"f16.expanded", halves.select(0, 1).to(DType::Float16).unsqueeze(0).expand({3, 3})},
      {"bool.transposed", bools.t()},
      {"scalar", scalar_tensor(3.5)},
      {"empty", zeros({0, 3})},
      {"empty.i64", zeros({2, 0}, DType::Int64)},
  };
}

template <class F>
void check_throws_naming(const F& f, const std::string& path, const std::string& what) {
  CHECK_THROWS_WITH(f(), Contains(path) && Contains(what));
}

// Writes `bytes` as a file and checks that opening it fails with a message naming the file and `what`.
void check_rejected(const TempDir& tmp, const Bytes& bytes, const std::string& what) {
  const std::string path = tmp.file("corrupt.safetensors");
  write_bytes(path, bytes);
  INFO("file bytes: " << bytes.substr(0, 300));
  check_throws_naming([&] { open_safetensors(path); }, path, what);
}

}  // namespace

// ---- round trips -------------------------------------------------------------------------------

TEST_CASE("every dtype round-trips bit-exactly from non-contiguous views", "[safetensors]") {
  TempDir tmp;
  const std::string path = tmp.file("all.safetensors");
  const Named tensors = sample_tensors();
  save_safetensors(path, tensors);

  SafetensorsReader reader = open_safetensors(path);
  std::vector<std::string> expected_names;
  for (const auto& [name, t] : tensors) expected_names.push_back(name);
  CHECK(reader.names() == expected_names);  // our writer keeps the given order
  for (const auto& [name, t] : tensors) {
    INFO(name);
    REQUIRE(reader.contains(name));
    const SafetensorsTensorInfo& info = reader.info(name);
    CHECK(info.dtype == t.dtype());
    CHECK(info.shape == t.shape());
    CHECK(info.data_end - info.data_begin == static_cast<uint64_t>(t.numel()) * t.element_size());
    const Tensor loaded = reader.load(name);
    check_same(loaded, t);
    CHECK(!loaded.requires_grad());
  }
  CHECK(reader.metadata() == std::map<std::string, std::string>{{"format", "pt"}});

  const Named all = load_safetensors(path);
  REQUIRE(all.size() == tensors.size());
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].first == tensors[i].first);
    check_same(all[i].second, tensors[i].second);
  }
  // a file with no tensors at all
  save_safetensors(path, {}, {});
  CHECK(read_bytes(path) == le64(8) + "{}      ");
  CHECK(open_safetensors(path).names().empty());
}

TEST_CASE("the header is compact JSON padded to 8 bytes, byte for byte", "[safetensors]") {
  TempDir tmp;
  const std::string path = tmp.file("golden.safetensors");
  // A worked example hand-built from the format's rules (huggingface/safetensors' README): keys in
  // insertion order, compact JSON, offsets relative to the data buffer, padded with spaces to 8 bytes.
  save_safetensors(path, {{"b", scalar_tensor(7, DType::Int64)}, {"a", from_vector(std::vector<float>{1, 2}, {2})}},
                   {});
  const std::string header =
      R"({"b":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  REQUIRE(header.size() == 107);
  const Bytes expected = le64(112) + header + "     " + le64(7) + floats({1, 2});
  const Bytes got = read_bytes(path);
  CHECK(got.size() == 136);
  CHECK(got == expected);

  // Default metadata comes first; the data buffer starts 8-byte aligned whatever the name lengths.
  for (size_t len = 1; len <= 9; ++len) {
    save_safetensors(path, {{std::string(len, 'w'), ones({3})}});
    const Bytes b = read_bytes(path);
    uint64_t n;
    std::memcpy(&n, b.data(), 8);
    CHECK(n % 8 == 0);
    CHECK(b.substr(8, 31) == R"({"__metadata__":{"format":"pt"})");
    CHECK(b.size() == 8 + n + 12);
  }
}

TEST_CASE("metadata and names with escapes and Unicode round-trip", "[safetensors]") {
  TempDir tmp;
  const std::string path = tmp.file("meta.safetensors");
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"quotes \"and\" \\backslashes\\", "tab\tnewline\ncr\rcontrol\x01\x1f end"},
      {"unicode", "é ✓ 𝄞"},
      {"empty", ""},
  };
  const std::string odd_name = "weird \"name\" \\ \n ✓";
  save_safetensors(path, {{odd_name, ones({2})}, {"plain", zeros({1})}}, metadata);
  const SafetensorsReader reader = open_safetensors(path);
  CHECK(reader.metadata() == metadata);
  CHECK(reader.names() == std::vector<std::string>{odd_name, "plain"});
  CHECK(reader.load(odd_name).to_vector<float>() == std::vector<float>{1, 1});

  // Empty metadata writes no "__metadata__" entry at all.
  save_safetensors(path, {{"x", ones({1})}}, {});
  CHECK(read_bytes(path).find("__metadata__") == Bytes::npos);
  CHECK(open_safetensors(path).metadata().empty());
}

// ---- files from the Python reference writer ----------------------------------------------------

TEST_CASE("files written by Python safetensors.torch.save_file load with exact values", "[safetensors]") {
  // Values: see the closed forms in tools/make_safetensors_fixture.py; recomputed here with the
  // same float32 / float64 operations, so equality is exact.
  const std::string path = std::string(TESSERA_TEST_DATA_DIR) + "/python_save_file.safetensors";
  const SafetensorsReader reader = open_safetensors(path);
  CHECK(reader.metadata() == std::map<std::string, std::string>{
                                 {"format", "pt"}, {"note", "quote \" backslash \\ tab \t newline \n unicode é ✓"}});
  CHECK(reader.names().size() == 9);
  for (size_t i = 1; i < reader.names().size(); ++i)
    CHECK(reader.info(reader.names()[i - 1]).data_end == reader.info(reader.names()[i]).data_begin);

  const Tensor qkv = reader.load("blocks.0.attn.qkv.weight");
  REQUIRE(qkv.dtype() == DType::Float32);
  REQUIRE(qkv.shape() == Shape{3, 4});
  for (int i = 0; i < 12; ++i) CHECK(qkv.data<float>()[i] == (static_cast<float>(i) - 5.0f) / 7.0f);

  const Tensor head = reader.load("head.weight");
  REQUIRE(head.dtype() == DType::Float64);
  REQUIRE(head.shape() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(head.data<double>()[i] == (static_cast<double>(i) - 2.0) / 3.0);

  const Tensor nw = reader.load("norm.weight");
  REQUIRE(nw.dtype() == DType::Float16);
  REQUIRE(nw.shape() == Shape{5});
  for (int i = 0; i < 5; ++i) CHECK(nw.data<Float16>()[i].bits == Float16((static_cast<float>(i) - 2.0f) / 3.0f).bits);

  const Tensor nb = reader.load("norm.bias");
  REQUIRE(nb.dtype() == DType::BFloat16);
  REQUIRE(nb.shape() == Shape{2, 2});
  for (int i = 0; i < 4; ++i)
    CHECK(nb.data<BFloat16>()[i].bits == BFloat16((static_cast<float>(i) + 1.0f) / 3.0f).bits);

  const Tensor count = reader.load("bn.num_batches_tracked");
  CHECK(count.dtype() == DType::Int64);
  CHECK(count.dim() == 0);
  CHECK(*count.data<int64_t>() == 7);
  CHECK(reader.load("big").to_vector<int64_t>() ==
        std::vector<int64_t>{-(int64_t{1} << 62), -1, 0, (int64_t{1} << 40) + 5});

  const Tensor mask = reader.load("mask");
  REQUIRE(mask.dtype() == DType::Bool);
  REQUIRE(mask.shape() == Shape{2, 3});
  for (int i = 0; i < 6; ++i) CHECK(mask.data<bool>()[i] == (i % 3 == 0));

  CHECK(reader.load("empty").shape() == Shape{0, 4});
  CHECK(reader.info("empty").dtype_name == "F32");
  CHECK(reader.load("ünï.cödé").to_vector<float>() == std::vector<float>{1.5f, -2.25f});
  CHECK(load_safetensors(path).size() == 9);

  const std::string bare = std::string(TESSERA_TEST_DATA_DIR) + "/python_no_metadata.safetensors";
  const SafetensorsReader r2 = open_safetensors(bare);
  CHECK(r2.metadata().empty());
  CHECK(r2.names() == std::vector<std::string>{"x"});
  CHECK(r2.load("x").to_vector<float>() == std::vector<float>{1, 2});
}

// ---- corrupt files -----------------------------------------------------------------------------

TEST_CASE("unreadable and malformed files are rejected with errors naming the file and the problem",
          "[safetensors][errors]") {
  TempDir tmp;
  const std::string f32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const Bytes two = floats({1, 2});

  SECTION("the file itself") {
    check_throws_naming([&] { open_safetensors(tmp.file("missing.safetensors")); }, "missing.safetensors",
                        "cannot open");
    check_throws_naming([&] { open_safetensors(tmp.dir.string()); }, tmp.dir.string(), "is a directory");
    check_rejected(tmp, "", "0 bytes, too short");
    check_rejected(tmp, "abc", "3 bytes, too short");
  }
  SECTION("header length") {
    const Bytes good = st_bytes(f32x2, two);
    check_rejected(tmp, le64(f32x2.size() + 9) + f32x2 + two, "exceeds the");
    check_rejected(tmp, le64(uint64_t{1} << 63) + good.substr(8), "exceeds the format's limit");
    check_rejected(tmp, good.substr(0, 40), "truncated");
    check_rejected(tmp, le64(0), "not valid JSON");
  }
  SECTION("header JSON syntax") {
    for (const char* header :
         {R"({"a":{"dtype":"F32",)", R"({'a':1})", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)",
          R"({"a":{"dtype":"F32","shape":[2,],"data_offsets":[0,8]}})", R"({"a":{"dtype":"F\q"}})",
          R"({"a":{"dtype":"F\ud800"}})", "{\"a\":{\"dtype\":\"F\xff\"}}", "{\"a\":{\"dtype\":\"F\n\"}}",
          R"({"a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]}})", R"({"a":{"x":tru}})"}) {
      INFO(header);
      check_rejected(tmp, st_bytes(header, two), "not valid JSON");
    }
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x)", two),
                   "unexpected 'x' after the end of the document at byte 55 of the header (file offset 63)");
    // Deep nesting is refused, not a stack overflow.
    check_rejected(tmp, st_bytes(R"({"a":{"x":)" + std::string(100000, '['), two), "nesting deeper");
  }
  SECTION("header structure") {
    check_rejected(tmp, st_bytes("[]", ""), "the header must be an object, got an array");
    check_rejected(tmp, st_bytes(R"({"a":5})", ""), "tensor 'a' must be an object, got a number");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", two),
                   "tensor 'a': missing field \"data_offsets\"");
    check_rejected(tmp, st_bytes(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", two), "missing field \"dtype\"");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", two),
                   "tensor 'a': unknown dtype \"F128\"");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", two),
                   "\"dtype\" must be a string, got a number");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two),
                   "\"dtype\" appears twice");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", two),
                   "tensor 'a': \"shape\"[0] is negative (-2)");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", two),
                   "\"shape\"[0] is not an integer (2.0)");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", two),
                   "\"shape\" must be an array, got a string");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", two),
                   "is too large");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", ""),
                   "is too large");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})", two),
                   "dimension too large");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]}})", two),
                   "does not fit in 64 bits");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", two),
                   "exactly 2 integers [begin, end], got 1");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", two), "got more");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "xx"),
                   "do not fill whole bytes");
    check_rejected(tmp,
                   st_bytes(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two),
                   "__metadata__[\"k\"] must be a string, got a number");
    check_rejected(tmp, st_bytes(R"({"__metadata__":[],"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two),
                   "__metadata__ must be an object");
    check_rejected(
        tmp,
        st_bytes(
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            two),
        "tensor 'a' appears twice");
  }
  SECTION("data offsets") {
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", two),
                   "tensor 'a': data_offsets [0, 4] hold 4 bytes, but F32 [2] needs 8");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", two),
                   "end before they begin");
    check_rejected(tmp, st_bytes(f32x2, floats({1})), "extend past the end of the data buffer (4 bytes)");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,0]}})", two),
                   "end before they begin");
    const Bytes three = floats({1, 2, 3});
    check_rejected(
        tmp,
        st_bytes(
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            three),
        "tensor 'b': data_offsets [4, 8] overlap the previous tensor 'a'");
    check_rejected(
        tmp,
        st_bytes(
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            three),
        "leave a gap");
    check_rejected(tmp, st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two), "leave a gap");
    check_rejected(tmp, st_bytes(f32x2, three), "trailing bytes");
    check_rejected(tmp, st_bytes("{}", two), "the data buffer is 8 bytes but the tensors end at byte 0");
  }
}

TEST_CASE("valid headers with unusual but legal content open", "[safetensors]") {
  TempDir tmp;
  const std::string path = tmp.file("ok.safetensors");
  // Whitespace around and inside the JSON, unknown fields (ignored), escapes in names, tensors
  // listed out of offset order, an I32 tensor (listed and validated, but not loadable).
  const std::string header =
      " \n{ \"b\\u00e9\" : { \"data_offsets\" : [ 4 , 12 ] , \"shape\" : [ 2 ] , \"dtype\" : \"F32\" ,"
      " \"extra\": {\"nested\": [true, false, null, -1.5e3, \"s\"]} },"
      " \"i\": {\"dtype\": \"I32\", \"shape\": [1], \"data_offsets\": [0, 4]} }\t  ";
  Bytes data(4, '\0');
  data[0] = 42;
  write_bytes(path, st_bytes(header, data + floats({0.5f, -1})));
  const SafetensorsReader reader = open_safetensors(path);
  CHECK(reader.names() == std::vector<std::string>{"i", "bé"});
  CHECK(reader.load("bé").to_vector<float>() == std::vector<float>{0.5f, -1});
  CHECK(reader.info("i").dtype_name == "I32");
  CHECK(!reader.info("i").dtype.has_value());
  CHECK_THROWS_WITH(reader.load("i"),
                    Contains(path) && Contains("dtype I32, which Tessera cannot load") && Contains("F32, F64, I64"));
}

TEST_CASE("loading checks the name and BOOL bytes", "[safetensors][errors]") {
  TempDir tmp;
  const std::string path = tmp.file("model.safetensors");
  save_safetensors(path,
                   {{"blocks.0.attn.weight", ones({2})}, {"blocks.0.mlp.weight", ones({2})}, {"head.bias", ones({1})}});
  const SafetensorsReader reader = open_safetensors(path);
  // The suggestions rank names by common suffix: a forgotten "module." prefix is easy to spot.
  CHECK_THROWS_WITH(reader.load("module.blocks.0.mlp.weight"),
                    Contains(path) && Contains("no tensor named 'module.blocks.0.mlp.weight'") &&
                        Contains("has 3 tensors, e.g. 'blocks.0.mlp.weight', 'blocks.0.attn.weight', 'head.bias'"));
  CHECK_THROWS_WITH(reader.info("nope"), Contains("no tensor named 'nope'"));

  write_bytes(path, st_bytes(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", Bytes("\x01\x00\x02", 3)));
  CHECK_THROWS_WITH(open_safetensors(path).load("m"),
                    Contains(path) && Contains("tensor 'm': BOOL element 2 is stored as byte 2 (expected 0 or 1)"));
}

TEST_CASE("every truncation and every single-bit header flip is an error or a valid file, never a crash",
          "[safetensors][errors]") {
  TempDir tmp;
  const std::string good = tmp.file("good.safetensors"), bad = tmp.file("bad.safetensors");
  save_safetensors(good, {{"w", arange(0.0, 6.0, 1.0).reshape({2, 3})},
                          {"m", ones({3}, DType::Bool)},
                          {"n", scalar_tensor(3, DType::Int64)},
                          {"h", ones({2}, DType::Float16)}});
  const Bytes bytes = read_bytes(good);
  for (size_t len = 0; len < bytes.size(); ++len) {
    write_bytes(bad, bytes.substr(0, len));
    INFO("truncated to " << len << " bytes");
    CHECK_THROWS_AS(open_safetensors(bad), Error);
  }
  uint64_t header_end;
  std::memcpy(&header_end, bytes.data(), 8);
  header_end += 8;
  int opened = 0, rejected = 0;
  for (size_t bit = 0; bit < header_end * 8; ++bit) {
    Bytes flipped = bytes;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    write_bytes(bad, flipped);
    try {
      const SafetensorsReader reader(bad);
      for (const std::string& name : reader.names()) {
        try {
          reader.load(name);
        } catch (const Error&) {  // e.g. a dtype flipped to one Tessera cannot load
        }
      }
      ++opened;
    } catch (const Error&) { ++rejected; }
  }
  CHECK(rejected > opened);  // most flips break the JSON or the offsets; a few change a name or dtype
}

TEST_CASE("a reader keeps its mapping alive after the file is deleted and across copies", "[safetensors]") {
  TempDir tmp;
  const std::string path = tmp.file("w.safetensors");
  const Tensor large = arange(0.0, 100000.0, 1.0);  // spans many pages, released after each load
  save_safetensors(path, {{"w", arange(0.0, 5.0, 1.0)}, {"large", large}});
  std::optional<SafetensorsReader> first = open_safetensors(path);
  fs::remove(path);
  const SafetensorsReader copy = *first;
  first.reset();
  CHECK(copy.load("w").to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(raw(copy.load("large")) == raw(large));
  CHECK(raw(copy.load("large")) == raw(large));  // the released pages come back intact
}

// ---- atomic save -------------------------------------------------------------------------------

namespace {
// Lowers the process's maximum file size (write() then fails with EFBIG instead of raising SIGXFSZ)
// for the lifetime of the object: a disk-full-like failure in the middle of a save.
struct FileSizeLimit {
  rlimit saved{};
  void (*saved_handler)(int);
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved);
    saved_handler = signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved;
    lowered.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, saved_handler);
  }
};
}  // namespace

TEST_CASE("save_safetensors replaces files atomically and leaves the old file on failure", "[safetensors][atomic]") {
  TempDir tmp;
  const std::string path = tmp.file("model.safetensors");
  save_safetensors(path, {{"old", ones({4})}});
  const Bytes old_bytes = read_bytes(path);
  auto check_old_file_intact = [&] {
    CHECK(read_bytes(path) == old_bytes);
    CHECK(tmp.leftovers().empty());
  };

  SECTION("a successful save replaces the file") {
    save_safetensors(path, {{"new", full({3}, 2.0)}});
    const SafetensorsReader reader = open_safetensors(path);
    CHECK(reader.names() == std::vector<std::string>{"new"});
    CHECK(reader.load("new").to_vector<float>() == std::vector<float>{2, 2, 2});
    CHECK(tmp.leftovers().empty());
  }
  SECTION("invalid input is refused before anything is written") {
    CHECK_THROWS_WITH(save_safetensors(path, {{"a", ones({1})}, {"b", ones({1})}, {"a", zeros({1})}}),
                      Contains(path) && Contains("duplicate tensor name 'a' (#0 and #2)"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"a", ones({1})}, {"u", Tensor()}}),
                      Contains(path) && Contains("tensor 'u' (#1) is undefined"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", ones({1})}}), Contains("is reserved"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"bad\xff", ones({1})}}), Contains("tensor name #0 is not valid UTF-8"));
    CHECK_THROWS_WITH(save_safetensors(path, {{"a", ones({1})}}, {{"k", "\xc3"}}),
                      Contains("metadata[\"k\"] is not valid UTF-8"));
    check_old_file_intact();
  }
  SECTION("an I/O failure in the middle of the write") {
    const Tensor large = zeros({256, 1024});  // 1 MiB, over the limit below
    {
      FileSizeLimit limit(64 * 1024);
      CHECK_THROWS_WITH(save_safetensors(path, {{"large", large}}), Contains(path) && Contains("write failed") &&
                                                                        Contains("File too large") &&
                                                                        Contains("left unchanged"));
    }
    save_safetensors(tmp.file("other.safetensors"), {{"large", large}});  // the limit is gone again
    check_old_file_intact();
  }
  SECTION("the target directory does not exist") {
    const std::string nowhere = (tmp.dir / "no/such/dir/model.safetensors").string();  // file() would create it
    CHECK_THROWS_WITH(save_safetensors(nowhere, {{"a", ones({1})}}), Contains(nowhere) &&
                                                                         Contains("cannot create the temporary file") &&
                                                                         Contains("No such file or directory"));
    CHECK(!fs::exists(tmp.dir / "no"));
    check_old_file_intact();
  }
  SECTION("the target is a directory: the rename fails after a complete write") {
    const std::string dir_target = tmp.file("taken");
    fs::create_directory(dir_target);
    fs::create_directory(dir_target + "/keep");  // a non-empty directory cannot be renamed over
    CHECK_THROWS_WITH(save_safetensors(dir_target, {{"a", ones({1})}}),
                      Contains(dir_target) && Contains("cannot rename"));
    CHECK(fs::is_directory(dir_target + "/keep"));
    check_old_file_intact();
  }
}

// ---- the JSON parser ---------------------------------------------------------------------------

TEST_CASE("json::Reader decodes escapes and rejects malformed text with the byte offset", "[safetensors][json]") {
  {
    json::Reader r(R"( ["a\"\\\/\b\f\n\r\t", "\u00e9\u2713\ud834\udd1e", 0, -1.5e+3, {}, [], true, null] )");
    r.begin_array();
    REQUIRE(r.next_item());
    CHECK(r.read_string() == "a\"\\/\b\f\n\r\t");
    REQUIRE(r.next_item());
    CHECK(r.read_string() == "é✓𝄞");
    REQUIRE(r.next_item());
    CHECK(r.read_number() == "0");
    REQUIRE(r.next_item());
    CHECK(r.read_number() == "-1.5e+3");
    for (json::Kind k : {json::Kind::Object, json::Kind::Array, json::Kind::Bool, json::Kind::Null}) {
      REQUIRE(r.next_item());
      CHECK(r.peek() == k);
      r.skip_value();
    }
    CHECK(!r.next_item());
    r.finish();
  }
  // Quoting then parsing gives back every byte value and multi-byte characters.
  std::string all;
  for (int c = 1; c < 128; ++c) all += static_cast<char>(c);
  all += "é✓𝄞";
  std::string quoted;
  json::append_quoted(quoted, all);
  CHECK(json::Reader(quoted).read_string() == all);

  uint64_t v = 0;
  CHECK(json::parse_uint64("18446744073709551615", v) == json::IntParse::Ok);
  CHECK(v == UINT64_MAX);
  CHECK(json::parse_uint64("18446744073709551616", v) == json::IntParse::Overflow);
  CHECK(json::parse_uint64("-3", v) == json::IntParse::Negative);
  CHECK(json::parse_uint64("1e2", v) == json::IntParse::NotInteger);

  CHECK(json::invalid_utf8_offset("ok é") == std::string_view::npos);
  CHECK(json::invalid_utf8_offset("ab\xc0\xaf") == 2);         // overlong '/'
  CHECK(json::invalid_utf8_offset("\xed\xa0\x80") == 0);       // UTF-16 surrogate
  CHECK(json::invalid_utf8_offset("x\xf4\x90\x80\x80") == 1);  // above U+10FFFF
  CHECK(json::invalid_utf8_offset("\xe2\x9c") == 0);           // truncated sequence

  auto syntax_error = [](const std::string& text) {
    json::Reader r(text);
    r.skip_value();
    r.finish();
  };
  CHECK_THROWS_AS(syntax_error("{\"a\" 1}"), json::SyntaxError);
  CHECK_THROWS_WITH(syntax_error("{\"a\" 1}"), Contains("expected ':'") && Contains("at byte 5"));
  CHECK_THROWS_WITH(syntax_error("[1,]"), Contains("expected a value, found ']' at byte 3"));
  CHECK_THROWS_WITH(syntax_error("{\"a\":1,}"), Contains("expected a string key at byte 7"));
  CHECK_THROWS_WITH(syntax_error("[1 2]"), Contains("expected ',' or ']'"));
  CHECK_THROWS_WITH(syntax_error("\"\\udc00\""), Contains("unpaired low surrogate"));
  CHECK_THROWS_WITH(syntax_error("\"\\ud800x\""), Contains("unpaired high surrogate"));
  CHECK_THROWS_WITH(syntax_error("\"\\u12g4\""), Contains("invalid \\u escape"));
  CHECK_THROWS_WITH(syntax_error("-"), Contains("invalid number"));
  CHECK_THROWS_WITH(syntax_error("1."), Contains("invalid number"));
  CHECK_THROWS_WITH(syntax_error("nul"), Contains("invalid literal"));
  CHECK_THROWS_WITH(syntax_error("{} {}"), Contains("after the end of the document"));
  CHECK_THROWS_WITH(syntax_error(""), Contains("unexpected end of input"));
  CHECK_THROWS_WITH(syntax_error(std::string(200, '[')), Contains("nesting deeper than 128 levels"));
  CHECK_NOTHROW(syntax_error(std::string(128, '[') + std::string(128, ']')));
}
