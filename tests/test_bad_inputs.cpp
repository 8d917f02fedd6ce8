// The bad-input corpus: generated broken weights, arrays, images, datasets, checkpoints and flags,
// each of which must be refused with an error that names the file (or flag) and says what was
// expected or claimed, never a crash, an allocation of what a header claims, or silent garbage.
// Inputs that fuzzing found are replayed separately (fuzz/regressions/, the `fuzz` tests).
#include <turbojpeg.h>
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "tessera/data/dataset.h"
#include "tessera/data/decode.h"
#include "tessera/data/encode.h"
#include "tessera/io/npy.h"
#include "gradcheck.h"
#include "tessera/io/safetensors.h"
#include "temp_dir.h"
#include "tools/cli/commands.h"
#include "tools/cli/config_file.h"
#include "tools/cli/train.h"
#include "tessera/train/checkpoint.h"

using namespace tessera;
using testing::TempDir;

namespace {

struct Case {
  std::string name;
  std::function<void()> run;             // must throw tessera::Error
  std::vector<std::string> message_has;  // substrings the message must contain
};

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// A safetensors file from its header text and data bytes.
std::string safetensors(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// A .npy file (version 1.0) from its header dict and data bytes.
std::string npy(const std::string& dict, const std::string& data) {
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  return bytes + dict + data;
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string jpeg_8x8() {
  data::Image img(8, 8, 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 7);
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, img.pixels.data(), 8, 0, 8, TJPF_RGB, &out, &size, TJSAMP_444, 90, 0);
  std::string bytes(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(tj);
  return bytes;
}

// The JPEG with its frame header (SOF0) claiming width x height.
std::string jpeg_claiming(uint16_t width, uint16_t height) {
  std::string j = jpeg_8x8();
  const size_t sof = j.find("\xFF\xC0");
  j[sof + 5] = static_cast<char>(height >> 8), j[sof + 6] = static_cast<char>(height);
  j[sof + 7] = static_cast<char>(width >> 8), j[sof + 8] = static_cast<char>(width);
  return j;
}

std::string gzipped(const std::string& path_for_tmp, const std::string& bytes) {
  gzFile f = gzopen(path_for_tmp.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return read(path_for_tmp);
}

}  // namespace

TEST_CASE("every generated bad input is refused with a message naming the file or flag and the problem",
          "[bad-inputs]") {
  TempDir tmp;
  std::vector<Case> cases;
  // A file in the temp dir holding `bytes`.
  const auto file = [&](const std::string& name, const std::string& bytes) {
    const std::string path = tmp.file(name);
    write(path, bytes);
    return path;
  };

  // ---- weights (safetensors) ------------------------------------------------------------------
  const auto st_case = [&](const std::string& name, const std::string& bytes, std::vector<std::string> has) {
    const std::string path = file(name + ".safetensors", bytes);
    has.insert(has.begin(), path);
    cases.push_back({"safetensors: " + name, [path] { (void)load_safetensors(path); }, has});
  };
  const std::string good_header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string good = safetensors(good_header, std::string(8, '\1'));
  st_case("empty", "", {"too short"});
  st_case("header-length-over-limit", le64(200'000'000) + "{}", {"exceeds the format's limit of 100000000"});
  st_case("header-length-past-end", le64(5000) + "{}", {"header length 5000", "truncated"});
  st_case("truncated-data", good.substr(0, good.size() - 3), {"extend past the end", "truncated"});
  st_case("trailing-bytes", good + "xx", {"trailing bytes"});
  st_case("not-json", safetensors("{nope", ""), {"not valid JSON"});
  st_case("header-not-object", safetensors("[]", ""), {"the header must be an object"});
  st_case("unknown-dtype", safetensors(R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", std::string(8, 0)),
          {"unknown dtype \"F33\""});
  st_case("missing-shape", safetensors(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", std::string(8, 0)),
          {"missing field \"shape\""});
  st_case("negative-dim", safetensors(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 0)),
          {"negative"});
  st_case("offsets-disagree-with-shape",
          safetensors(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 0)),
          {"hold 8 bytes", "needs 12"});
  st_case(
      "huge-shape",
      safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", std::string(8, 0)),
      {"too large"});
  st_case("gap", safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, 0)),
          {"leave a gap"});
  st_case(
      "overlap",
      safetensors(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          std::string(8, 0)),
      {"overlap"});
  st_case(
      "duplicate-key",
      safetensors(
          R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          std::string(8, 0)),
      {"'w' appears twice"});
  st_case("bool-byte-2",
          safetensors(R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\1\2", 2)),
          {"stored as byte 2", "expected 0 or 1"});
  st_case("invalid-utf8", safetensors("{\"\xff\":1}", ""), {"not valid JSON"});

  // ---- arrays (.npy) --------------------------------------------------------------------------
  const auto npy_case = [&](const std::string& name, const std::string& bytes, std::vector<std::string> has) {
    const std::string path = file(name + ".npy", bytes);
    has.insert(has.begin(), path);
    cases.push_back({"npy: " + name, [path] { (void)io::read_npy(path); }, has});
  };
  const std::string f32_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
  npy_case("not-npy", "hello, world", {"not a .npy file"});
  npy_case("version-9", std::string("\x93NUMPY\x09\x00\x00\x00", 10), {"unsupported format version 9"});
  npy_case("header-over-numpy-limit", std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\x00\x00", 4),
           {"more than numpy's limit of 10000"});
  npy_case("header-past-end", npy(f32_dict, "").substr(0, 40), {"truncated", "the header claims"});
  npy_case("truncated-data", npy(f32_dict, std::string(20, 0)), {"truncated", "needs 24 data bytes, the file has 20"});
  npy_case("trailing-data", npy(f32_dict, std::string(28, 0)), {"4 trailing bytes"});
  npy_case("claims-4-petabytes", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000000,), }\n", ""),
           {"truncated", "needs 4000000000000000 data bytes, the file has 0"});
  npy_case("shape-overflows",
           npy("{'descr': '<f8', 'fortran_order': False, 'shape': (999999999999999, 999999999999999), }\n", ""),
           {"too large"});
  npy_case("unsupported-dtype", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }\n", "abc"),
           {"dtype '|u1' is not supported"});
  npy_case("fortran-order", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n", std::string(4, 0)),
           {"Fortran-order"});
  npy_case("no-shape", npy("{'descr': '<f4', 'fortran_order': False, }\n", ""), {"no 'shape' entry"});
  npy_case("bad-dimension", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }\n", ""),
           {"bad dimension 'x'"});
  npy_case("negative-dimension", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n", ""),
           {"bad dimension '-2'"});

  // ---- images ---------------------------------------------------------------------------------
  const auto image_case = [&](const std::string& name, const std::string& bytes, std::vector<std::string> has) {
    const std::string path = file(name, bytes);
    has.insert(has.begin(), path);
    cases.push_back({"image: " + name, [path] { (void)data::decode_image(path); }, has});
  };
  const std::string jpeg = jpeg_8x8();
  data::write_png(tmp.file("ok.png"), data::Image(4, 4, 3));
  const std::string png = read(tmp.file("ok.png"));
  image_case("empty.jpg", "", {"empty file"});
  image_case("garbage.png", "definitely not an image", {"not a supported image"});
  image_case("truncated.jpg", jpeg.substr(0, jpeg.size() - 10), {"truncated JPEG"});
  image_case("header-only.jpg", jpeg.substr(0, 20), {"JPEG"});
  image_case("bomb.jpg", jpeg_claiming(60000, 60000), {"claims 60000x60000 = 3600000000 pixels", "--max-image-pixels"});
  {
    std::string bomb = png;                // IHDR width and height at bytes 16..23
    const std::string side = be32(15000);  // 225 M pixels: under stb_image's own limit of 2^30 bytes
    bomb.replace(16, 4, side).replace(20, 4, side);
    image_case("bomb.png", bomb, {"claims 15000x15000 = 225000000 pixels", "more than the limit of 178956970"});
  }
  {
    std::string idat = png;  // the first chunk after IHDR (byte 33) claiming 2 GB of data
    idat.replace(33, 4, be32(0x7fffffff));
    image_case("chunk-claims-2gb.png", idat, {"truncated PNG", "claims 2147483647 bytes"});
  }
  image_case("truncated.png", png.substr(0, png.size() - 20), {"PNG"});
  image_case("pnm-overflow.ppm", "P6\n99999999999 2\n255\n", {"corrupt PNM header", "width has 11 digits"});
  cases.push_back({"image: missing file",
                   [&] { (void)data::decode_image(tmp.file("missing.jpg")); },
                   {tmp.file("missing.jpg"), "cannot open"}});
  cases.push_back({"image: pixel limit 0", [] { data::set_max_image_pixels(0); }, {"at least 1 pixel"}});

  // ---- datasets -------------------------------------------------------------------------------
  const std::string images_ok = be32(0x803) + be32(2) + be32(2) + be32(2) + std::string(8, 1);
  const std::string labels_ok = be32(0x801) + be32(2) + std::string("\3\4", 2);
  const auto idx_case = [&](const std::string& name, const std::string& images, const std::string& labels,
                            std::vector<std::string> has, bool fuzzed_is_labels = false) {
    const std::string dir = tmp.file("idx-" + name + "/x");
    const std::string root = std::filesystem::path(dir).parent_path().string();
    file("idx-" + name + "/t10k-images-idx3-ubyte", images);
    file("idx-" + name + "/t10k-labels-idx1-ubyte", labels);
    has.insert(has.begin(), root + (fuzzed_is_labels ? "/t10k-labels-idx1-ubyte" : "/t10k-images-idx3-ubyte"));
    cases.push_back({"idx: " + name, [root] { (void)data::open_idx_dataset(root, false, true, 1); }, has});
  };
  idx_case("bad-magic", be32(0x804) + images_ok.substr(4), labels_ok,
           {"not an IDX images file", "expected 0x00000803"});
  idx_case("truncated-header", images_ok.substr(0, 10), labels_ok, {"truncated", "needs 16"});
  idx_case("truncated-data", images_ok.substr(0, images_ok.size() - 3), labels_ok,
           {"truncated", "= 8 bytes of data, the file has 5"});
  idx_case("trailing-data", images_ok + "zz", labels_ok, {"more follow"});
  idx_case("claims-16-exabytes", be32(0x803) + be32(0xffffffff) + be32(0xffffffff) + be32(0xffffffff), labels_ok,
           {"more than 2^63 bytes"});
  idx_case("claims-4-gigabytes", be32(0x803) + be32(0xffff) + be32(0xffff) + be32(1) + "x", labels_ok,
           {"truncated", "the file has 1"});
  idx_case("zero-size-images", be32(0x803) + be32(2) + be32(0) + be32(5), labels_ok, {"images of 0x5 pixels"});
  idx_case("label-out-of-range", images_ok, be32(0x801) + be32(2) + std::string("\3\12", 2),
           {"label 10 of item 1", "[0, 10)"}, true);
  idx_case("count-mismatch", images_ok, be32(0x801) + be32(1) + std::string("\3", 1), {"has 2 images but"});
  idx_case("corrupt-gzip", gzipped(tmp.file("gz.tmp"), images_ok).substr(0, 20), labels_ok, {"t10k-images-idx3-ubyte"});
  const auto cifar_case = [&](const std::string& name, const std::string& batch, std::vector<std::string> has) {
    const std::string root =
        std::filesystem::path(file("cifar-" + name + "/test_batch.bin", batch)).parent_path().string();
    has.insert(has.begin(), root + "/test_batch.bin");
    cases.push_back({"cifar: " + name, [root] { (void)data::open_cifar_dataset(root, false, 10, 3); }, has});
  };
  cifar_case("empty", "", {"not a positive multiple of the CIFAR-10 record size 3073"});
  cifar_case("truncated-record", std::string(3073 + 100, '\1'), {"3173 bytes", "record size 3073"});
  cifar_case("label-out-of-range", std::string(1, '\12') + std::string(3072, 0), {"record 0 has label 10", "[0, 10)"});
  cases.push_back({"cifar: class names",
                   [&] {
                     file("cifar-names/test_batch.bin", std::string(3073, '\1'));
                     file("cifar-names/batches.meta.txt", "cat\ndog\n");
                     (void)data::open_cifar_dataset(tmp.file("cifar-names"), false, 10, 3);
                   },
                   {"batches.meta.txt has 2 class names, expected 10"}});

  // ---- checkpoints ----------------------------------------------------------------------------
  const nn::NamedTensors weights{{"w", full({2}, 1.0)}};
  save_safetensors(tmp.file("ck/a.safetensors"), weights, {{"checkpoint_id", "1"}, {"epoch", "0"}});
  save_safetensors(tmp.file("ck/a.state.safetensors"), {{"rng.seed", full({2}, 1.0)}},
                   {{"checkpoint_id", "2"}, {"epoch", "0"}});
  cases.push_back({"checkpoint: files of different saves",
                   [&] { (void)train::load_checkpoint(tmp.file("ck/a.safetensors")); },
                   {tmp.file("ck/a.safetensors"), "not from the same save"}});
  save_safetensors(tmp.file("ck/b.safetensors"), weights, {{"checkpoint_id", "3"}});
  cases.push_back({"checkpoint: state file missing",
                   [&] { (void)train::load_checkpoint(tmp.file("ck/b.safetensors")); },
                   {tmp.file("ck/b.state.safetensors"), "does not exist"}});
  save_safetensors(tmp.file("ck/c.safetensors"), weights, {{"checkpoint_id", "4"}});
  save_safetensors(tmp.file("ck/c.state.safetensors"), {{"rng.seed", full({2}, 1.0)}},
                   {{"checkpoint_id", "4"}, {"epoch", "x"}});
  cases.push_back({"checkpoint: bad epoch",
                   [&] { (void)train::load_checkpoint(tmp.file("ck/c.safetensors")); },
                   {tmp.file("ck/c.state.safetensors"), "invalid epoch 'x'"}});
  save_safetensors(tmp.file("ck/d.safetensors"), weights, {{"checkpoint_id", "5"}});
  save_safetensors(tmp.file("ck/d.state.safetensors"), {{"rng.seed", full({2}, 1.0)}},
                   {{"checkpoint_id", "5"}, {"epoch", "1"}});
  cases.push_back({"checkpoint: stored scalar of the wrong type",
                   [&] { (void)train::state_scalar(train::load_checkpoint(tmp.file("ck/d.safetensors")), "rng.seed"); },
                   {tmp.file("ck/d.state.safetensors"), "'rng.seed' must be one int64, got float32[2]"}});
  cases.push_back(
      {"checkpoint: stored scalar missing",
       [&] { (void)train::state_scalar(train::load_checkpoint(tmp.file("ck/d.safetensors")), "rng.offset"); },
       {tmp.file("ck/d.state.safetensors"), "no 'rng.offset' entry"}});

  // ---- flags ----------------------------------------------------------------------------------
  const auto flag_case = [&](const std::string& name, cli::Argv argv, std::vector<std::string> has) {
    cases.push_back({"flags: " + name, [argv] { (void)cli::run_inspect(argv); }, has});
  };
  const cli::Argv model{"--model", "xcit_nano_12_p16_224"};
  const auto with = [&](cli::Argv extra) {
    cli::Argv a = model;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  flag_case("kwarg-huge", with({"--model-kwargs", "depth=1e30"}), {"model kwarg depth", "[1, 16777216]"});
  flag_case("kwarg-fraction", with({"--model-kwargs", "depth=2.5"}), {"model kwarg depth", "integer"});
  flag_case("kwarg-infinite-ratio", with({"--model-kwargs", "mlp_ratio=inf"}),
            {"model kwarg mlp_ratio", "(0, 16777216]"});
  flag_case("kwarg-not-a-number", with({"--model-kwargs", "depth=abc"}),
            {"--model-kwargs", "depth needs a number, got 'abc'"});
  flag_case("kwarg-no-key", with({"--model-kwargs", "=4"}), {"--model-kwargs", "expected KEY=VALUE, got '=4'"});
  flag_case("kwarg-unknown", with({"--model-kwargs", "depht=4"}), {"unknown model kwarg 'depht'", "depth, embed_dim"});
  flag_case("img-size-not-integer", with({"--img-size", "32px"}), {"--img-size", "expected an integer, got '32px'"});
  flag_case("unknown-flag", with({"--imgsize", "32"}), {"unknown option '--imgsize'"});
  flag_case("missing-value", with({"--num-classes"}), {"--num-classes needs a value"});
  flag_case("unknown-model", {"--model", "xcit_nano"}, {"xcit_nano"});

  // ---- hostile bytes: a file's own bytes are quoted escaped, never raw (core/printable.h) ------
  {
    std::string odd = png;  // the chunk after IHDR (byte 33): an escape sequence as its type
    odd.replace(33, 8, be32(0x7fffffff) + std::string("\xa9U\x1b[", 4));
    image_case("odd-chunk.png", odd, {"truncated PNG: chunk '\\xa9U\\x1b[' at byte 33"});
  }
  st_case("hostile-key",
          safetensors(R"({"\u001b[31mw":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("\u001b[31mw":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                      std::string(8, 0)),
          {"'\\x1b[31mw' appears twice"});
  npy_case("hostile-dtype", npy("{'descr': '\x1b]0;owned\x07\xff', 'fortran_order': False, 'shape': (3,), }\n", "abc"),
           {"dtype '\\x1b]0;owned\\x07\\xff' is not supported"});
  cases.push_back(
      {"config: hostile value",
       [] { (void)cli::parse_config("epochs: \"\\x1b[2J10\"\n", "hostile.yaml", cli::train_config_keys()); },
       {"hostile.yaml", "'epochs' (line 1)", "got '\\x1b[2J10'"}});

  REQUIRE(cases.size() >= 50);
  for (const Case& c : cases) {
    INFO(c.name);
    try {
      c.run();
      FAIL_CHECK("accepted: " << c.name);
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(is_printable(message));  // whatever bytes the input held
      for (const std::string& part : c.message_has) {
        INFO("message: " << message);
        CHECK(message.find(part) != std::string::npos);
      }
    }
  }
  data::set_max_image_pixels(data::kDefaultMaxImagePixels);
}

TEST_CASE("printable: text passes, control bytes and malformed UTF-8 are escaped byte by byte", "[bad-inputs]") {
  CHECK(printable("weights.safetensors: 'blocks.0.attn' [2, 3]") == "weights.safetensors: 'blocks.0.attn' [2, 3]");
  CHECK(printable("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x9d") ==
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x9d");
  CHECK(printable("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");  // a terminal's escape sequences
  CHECK(printable("a\nb\tc\rd\x7f") == "a\\x0ab\\x09c\\x0dd\\x7f");  // C0 controls and DEL
  CHECK(printable(std::string("nul\0", 4)) == "nul\\x00");
  CHECK(printable("\xc2\x9b"
                  "2J") == "\\xc2\\x9b2J");                             // C1: U+009B, a one-byte CSI
  CHECK(printable("\xe2\x80\xaetxt.exe") == "\\xe2\\x80\\xaetxt.exe");  // U+202E reorders what is read
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");                         // never in UTF-8
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                         // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");                // a surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");       // past U+10FFFF
  CHECK(printable("\xe6\x97") == "\\xe6\\x97");                         // a sequence cut short
  CHECK(printable("\xa9U") == "\\xa9U");                                // a lone continuation byte
  CHECK(is_printable("plain, caf\xc3\xa9"));
  CHECK_FALSE(is_printable("bell\x07"));
  // An Error escapes its message, whoever built it.
  CHECK(std::string(Error("key '\x1b]0;x\x07'").what()) == "key '\\x1b]0;x\\x07'");
}
