// Data input (data/decode.h, data/dataset.h, data/loader.h): image decoding of JPEG (RGB,
// grayscale, CMYK; written here with libjpeg-turbo's compressor), PNG and BMP (written with
// stb_image_write), corrupt and truncated files; MNIST IDX (raw and gzipped), CIFAR-10/100 binary
// batches and ImageFolder fixtures built in a temp dir; the DataLoader's determinism across worker
// counts, shuffling, drop_last, mid-epoch resume, corrupt-sample skipping, repeated augmentation,
// error propagation and shutdown; and the real Fashion-MNIST of Debian's dataset-fashion-mnist
// (with a loader throughput measurement).
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <turbojpeg.h>

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include "tessera/data/dataset.h"
#include "tessera/data/decode.h"
#include "tessera/data/loader.h"
#include "tessera/data/loader_sizing.h"
#include "jpeg_fixtures.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::data;
namespace fs = std::filesystem;
using Catch::Contains;

using testing::encode_jpeg;
using testing::max_abs_diff;
using testing::TempDir;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

// A smooth test pattern (JPEG reproduces it closely) with distinct channels.
Image pattern(int64_t h, int64_t w, int64_t c) {
  Image img(h, w, c);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) img.at(y, x)[k] = static_cast<uint8_t>(40 + 6 * x + 5 * y + 50 * k);
  return img;
}

void write_png(const std::string& path, const Image& img) {
  REQUIRE(stbi_write_png(path.c_str(), static_cast<int>(img.width), static_cast<int>(img.height),
                         static_cast<int>(img.channels), img.pixels.data(), 0) != 0);
}

uint8_t pil_luma(const uint8_t* p) {
  return static_cast<uint8_t>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

uint8_t idx_pixel(int64_t i, int64_t y, int64_t x) { return static_cast<uint8_t>(i * 12 + y * 4 + x + 1); }

// An IDX pair of n images 3x4 (pixel = idx_pixel) with labels i % 10, gzipped or not.
void write_idx_pair(const TempDir& t, const std::string& prefix, int64_t n, bool gz) {
  std::string images = be32(0x803) + be32(static_cast<uint32_t>(n)) + be32(3) + be32(4);
  std::string labels = be32(0x801) + be32(static_cast<uint32_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x) images += static_cast<char>(idx_pixel(i, y, x));
    labels += static_cast<char>(i % 10);
  }
  const std::string ext = gz ? ".gz" : "";
  auto write = gz ? write_gz : write_bytes;
  write(t.file(prefix + "-images-idx3-ubyte" + ext), images);
  write(t.file(prefix + "-labels-idx1-ubyte" + ext), labels);
}

// CIFAR record: label byte(s), then planar R, G, B; pixel value = (record, plane, position) mix.
uint8_t cifar_pixel(int64_t record, int64_t plane, int64_t p) {
  return static_cast<uint8_t>(record * 7 + plane * 85 + p);
}

std::string cifar_records(int64_t first, int64_t n, bool hundred) {
  std::string out;
  for (int64_t r = first; r < first + n; ++r) {
    if (hundred) out += static_cast<char>(r % 20);  // coarse label
    out += static_cast<char>(hundred ? (r * 7) % 100 : r % 10);
    for (int64_t plane = 0; plane < 3; ++plane)
      for (int64_t p = 0; p < 1024; ++p) out += static_cast<char>(cifar_pixel(r, plane, p));
  }
  return out;
}

// ---- loader fixtures ------------------------------------------------------------------------------

// In-memory dataset: item i is a 1x2 gray image holding i (low byte, high byte), label i % 5.
// Items in `corrupt` throw DataError; gets are counted.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(int64_t n, std::set<int64_t> corrupt = {}) : n_(n), corrupt_(std::move(corrupt)) {}
  int64_t size() const override { return n_; }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe(int64_t index) const override { return "item" + std::to_string(index); }
  Sample get(int64_t index) const override {
    check_index(index, "counting");
    ++gets;
    if (corrupt_.count(index)) throw DataError(describe(index) + ": broken on purpose");
    Image img(1, 2, 1);
    img.pixels = {static_cast<uint8_t>(index & 255), static_cast<uint8_t>(index >> 8)};
    return {img, index % 5};
  }
  mutable std::atomic<int64_t> gets{0};

 private:
  int64_t n_;
  std::set<int64_t> corrupt_;
  std::vector<std::string> classes_{"a", "b", "c", "d", "e"};
};

// [2, 1, 1]: the item number and the first draw of the sample's random stream.
Tensor index_and_draw(const EncodedImage& encoded, SampleRng& rng) {
  const Image img = encoded.decode();
  Tensor t = Tensor::empty({2, 1, 1});
  t.data<float>()[0] = static_cast<float>(img.pixels[0] + 256 * img.pixels[1]);
  t.data<float>()[1] = static_cast<float>(rng.uniform());
  return t;
}

struct Collected {
  std::vector<int64_t> batch_index;
  std::vector<std::vector<float>> images;
  std::vector<std::vector<int64_t>> labels;
  // Item numbers in delivery order (from index_and_draw's first channel).
  std::vector<int64_t> items() const {
    std::vector<int64_t> out;
    for (const auto& b : images)
      for (size_t i = 0; i < b.size(); i += 2) out.push_back(static_cast<int64_t>(b[i]));
    return out;
  }
  std::vector<float> draws() const {
    std::vector<float> out;
    for (const auto& b : images)
      for (size_t i = 1; i < b.size(); i += 2) out.push_back(b[i]);
    return out;
  }
};

Collected run_epoch(DataLoader& loader, int64_t epoch, int64_t skip = 0) {
  Collected c;
  loader.start_epoch(epoch, skip);
  while (auto b = loader.next()) {
    c.batch_index.push_back(b->index);
    c.images.push_back(b->images.to_vector<float>());
    c.labels.push_back(b->labels.to_vector<int64_t>());
  }
  return c;
}

LoaderOptions quiet(int64_t batch_size, int workers, uint64_t seed = 7) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.workers = workers;
  o.seed = seed;
  o.verbose = false;
  return o;
}

}  // namespace

// ---- decoding ---------------------------------------------------------------------------------

TEST_CASE("decode: RGB JPEG within JPEG tolerance, gray requested as luma", "[decode]") {
  TempDir t;
  const Image src = pattern(16, 24, 3);
  const std::string path = t.file("a.jpg");
  write_bytes(path, encode_jpeg(src, TJPF_RGB, TJSAMP_444));
  const Image rgb = decode_image(path);
  CHECK(max_abs_diff(rgb, src) <= 10);  // quality 98 without subsampling: a few levels
  const Image gray = decode_image(path, 1);
  REQUIRE(gray.channels == 1);
  for (int64_t i = 0; i < gray.height * gray.width; ++i) CHECK(gray.pixels[i] == pil_luma(&rgb.pixels[3 * i]));
  CHECK(decode_image(path, 0).channels == 3);
}

TEST_CASE("decode: grayscale JPEG becomes 3 equal channels, or stays 1", "[decode]") {
  TempDir t;
  const Image src = pattern(8, 8, 1);
  const std::string bytes = encode_jpeg(src, TJPF_GRAY, TJSAMP_GRAY);
  const Image one = decode_image_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem", 0);
  REQUIRE(one.channels == 1);
  CHECK(max_abs_diff(one, src) <= 10);
  const Image three = decode_image_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem", 3);
  REQUIRE(three.channels == 3);
  for (int64_t i = 0; i < 64; ++i)
    for (int c = 0; c < 3; ++c) CHECK(three.pixels[3 * i + c] == one.pixels[i]);
}

TEST_CASE("decode: CMYK JPEG is read with Adobe's inverted convention, as PIL does", "[decode]") {
  // Stored (C, M, Y, K) = (R, G, B, 255) means no black ink and inks 255 - R, ... so PIL's
  // R = K' - C' K' / 255 over the inverted values gives back (R, G, B).
  const Image rgb = pattern(8, 16, 3);
  Image cmyk(8, 16, 4);
  for (int64_t i = 0; i < 8 * 16; ++i) {
    for (int c = 0; c < 3; ++c) cmyk.pixels[4 * i + c] = rgb.pixels[3 * i + c];
    cmyk.pixels[4 * i + 3] = 255;
  }
  const std::string bytes = encode_jpeg(cmyk, TJPF_CMYK, TJSAMP_444);
  const Image out = decode_image_memory(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "cmyk.jpg");
  CHECK(max_abs_diff(out, rgb) <= 10);
}

TEST_CASE("decode: a CMYK JPEG written by PIL decodes bit-identically to PIL's convert('RGB')", "[decode]") {
  // tests/data/cmyk_pil.jpg (8x6, Adobe APP14 marker, inverted CMYK as Photoshop writes it) and the
  // reference cmyk_pil.rgb were made with /usr/bin/python3 and PIL 9.4:
  //   random.seed(1); im = Image.new('CMYK', (8, 6)); im.putdata([tuple(random.randrange(256)
  //   for _ in range(4)) for _ in range(48)]); im.save('cmyk_pil.jpg', quality=90)
  //   open('cmyk_pil.rgb', 'wb').write(Image.open('cmyk_pil.jpg').convert('RGB').tobytes())
  const std::string dir = TESSERA_TEST_DATA_DIR;
  const Image out = decode_image(dir + "/cmyk_pil.jpg");
  REQUIRE(out.height == 6);
  REQUIRE(out.width == 8);
  REQUIRE(out.channels == 3);
  const std::string ref = read_bytes(dir + "/cmyk_pil.rgb");
  CHECK(std::string(out.pixels.begin(), out.pixels.end()) == ref);
}

TEST_CASE("decode: PNG (RGBA, gray) and BMP, sniffed by content not extension", "[decode]") {
  TempDir t;
  const Image rgba = pattern(5, 7, 4);
  const std::string png = t.file("really_a_png.jpg");
  write_png(png, rgba);
  const Image rgb = decode_image(png);
  REQUIRE(rgb.channels == 3);
  for (int64_t i = 0; i < 35; ++i)
    for (int c = 0; c < 3; ++c) CHECK(rgb.pixels[3 * i + c] == rgba.pixels[4 * i + c]);  // alpha dropped
  const Image l = decode_image(png, 1);
  for (int64_t i = 0; i < 35; ++i) CHECK(l.pixels[i] == pil_luma(&rgba.pixels[4 * i]));

  const Image gray = pattern(4, 6, 1);
  write_png(t.file("g.png"), gray);
  CHECK(max_abs_diff(decode_image(t.file("g.png"), 0), gray) == 0);

  const Image src = pattern(3, 5, 3);
  REQUIRE(stbi_write_bmp(t.file("b.bmp").c_str(), 5, 3, 3, src.pixels.data()) != 0);
  CHECK(max_abs_diff(decode_image(t.file("b.bmp")), src) == 0);
}

TEST_CASE("decode: truncated, garbage, empty and missing files are DataErrors naming the path", "[decode]") {
  TempDir t;
  const std::string full = encode_jpeg(pattern(32, 32, 3), TJPF_RGB, TJSAMP_420);
  const std::string cut = t.file("cut.jpg");
  write_bytes(cut, full.substr(0, full.size() / 2));
  CHECK_THROWS_AS(decode_image(cut), DataError);
  CHECK_THROWS_WITH(decode_image(cut), Contains(cut) && Contains("truncated"));
  const std::string header_only = t.file("header.jpg");
  write_bytes(header_only, full.substr(0, 20));
  CHECK_THROWS_WITH(decode_image(header_only), Contains(header_only) && Contains("JPEG"));
  const std::string junk = t.file("junk.png");
  write_bytes(junk, "<html>not an image</html>");
  CHECK_THROWS_WITH(decode_image(junk), Contains(junk) && Contains("not a supported image"));
  const std::string png = t.file("cut.png");
  write_png(png, pattern(16, 16, 3));
  write_bytes(png, read_bytes(png).substr(0, 60));
  CHECK_THROWS_AS(decode_image(png), DataError);
  CHECK_THROWS_WITH(decode_image(png), Contains(png));
  write_bytes(t.file("empty.jpg"), "");
  CHECK_THROWS_WITH(decode_image(t.file("empty.jpg")), Contains("empty.jpg") && Contains("empty file"));
  CHECK_THROWS_WITH(decode_image(t.file("missing.jpg")), Contains("missing.jpg") && Contains("cannot open"));
  CHECK_THROWS_WITH(decode_image(cut, 2), Contains("want_channels"));
}

// ---- MNIST IDX --------------------------------------------------------------------------------

TEST_CASE("idx: raw and gzipped files parse to the same images, labels and shapes", "[idx]") {
  for (bool gz : {false, true}) {
    TempDir t;
    write_idx_pair(t, "train", 6, gz);
    write_idx_pair(t, "t10k", 2, gz);
    auto ds = open_dataset("mnist", t.dir.string(), "train", 1);
    REQUIRE(ds->size() == 6);
    CHECK(ds->classes() == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
    const Sample s = ds->get(4);
    REQUIRE(s.image.height == 3);
    REQUIRE(s.image.width == 4);
    REQUIRE(s.image.channels == 1);
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x) CHECK(s.image.at(y, x)[0] == idx_pixel(4, y, x));
    CHECK(s.label == 4);
    CHECK(ds->label(5) == 5);
    CHECK(ds->describe(4) == t.file(std::string("train-images-idx3-ubyte") + (gz ? ".gz" : "")) + "[4]");
    CHECK_THROWS_WITH(ds->get(6), Contains("out of range"));

    const Sample rgb = open_dataset("torch/MNIST", t.dir.string(), "train", 3)->get(1);
    REQUIRE(rgb.image.channels == 3);
    CHECK(rgb.image.at(2, 3)[0] == idx_pixel(1, 2, 3));
    CHECK(rgb.image.at(2, 3)[2] == idx_pixel(1, 2, 3));

    auto val = open_dataset("fashion-mnist", t.dir.string(), "val", 1);
    CHECK(val->size() == 2);
    CHECK(val->classes()[0] == "T-shirt/top");
    CHECK(val->classes()[9] == "Ankle boot");
  }
}

TEST_CASE("idx: bad magic, wrong sizes, mismatched counts and missing files are clear errors", "[idx]") {
  TempDir t;
  write_idx_pair(t, "train", 3, false);
  const std::string images = t.file("train-images-idx3-ubyte");
  const std::string good = read_bytes(images);

  write_bytes(images, be32(0x801) + good.substr(4));
  CHECK_THROWS_AS(open_dataset("mnist", t.dir.string(), "train", 1), DataError);
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "train", 1),
                    Contains(images) && Contains("magic 0x00000801") && Contains("expected 0x00000803"));
  write_bytes(images, good.substr(0, good.size() - 1));
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "train", 1),
                    Contains(images) && Contains("[3, 3, 4] = 36 bytes") && Contains("35"));
  write_bytes(images, good);
  write_bytes(t.file("train-labels-idx1-ubyte"), be32(0x801) + be32(2) + std::string("\x01\x02", 2));
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "train", 1), Contains("3 images") && Contains("2 labels"));
  write_bytes(t.file("train-labels-idx1-ubyte"), be32(0x801) + be32(3) + std::string("\x01\x0c\x02", 3));
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "train", 1), Contains("label 12"));
  write_gz(t.file("t10k-images-idx3-ubyte.gz"), good);
  write_bytes(t.file("t10k-labels-idx1-ubyte.gz"), "\x1f\x8b garbage");
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "test", 1), Contains("t10k-labels-idx1-ubyte.gz"));
  fs::remove(t.file("t10k-labels-idx1-ubyte.gz"));
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "test", 1),
                    Contains("no t10k-labels-idx1-ubyte or t10k-labels-idx1-ubyte.gz in " + t.dir.string()));
  CHECK_THROWS_WITH(open_dataset("mnist", t.file("nope"), "train", 1), Contains("nope") && Contains("does not exist"));
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "holdout", 1), Contains("holdout"));
  CHECK_THROWS_WITH(open_dataset("mnist", t.dir.string(), "train", 2), Contains("want_channels"));
  CHECK_THROWS_WITH(open_dataset("imagenet22k", t.dir.string(), "train", 3), Contains("unknown dataset"));
}

// ---- CIFAR ------------------------------------------------------------------------------------

TEST_CASE("cifar10: five training batches, planar records to HWC, class names", "[cifar]") {
  TempDir t;
  const std::string dir = "cifar-10-batches-bin/";
  for (int b = 0; b < 5; ++b)
    write_bytes(t.file(dir + "data_batch_" + std::to_string(b + 1) + ".bin"), cifar_records(2 * b, 2, false));
  write_bytes(t.file(dir + "test_batch.bin"), cifar_records(0, 3, false));
  auto ds = open_dataset("cifar10", t.dir.string(), "train", 3);
  REQUIRE(ds->size() == 10);
  CHECK(ds->classes() == cifar10_classes());
  for (int64_t r : {0, 5, 9}) {
    const Sample s = ds->get(r);
    REQUIRE(s.image.height == 32);
    REQUIRE(s.image.width == 32);
    CHECK(s.label == r % 10);
    for (int64_t p : {0, 33, 1023})
      for (int64_t c = 0; c < 3; ++c) CHECK(s.image.pixels[3 * p + c] == cifar_pixel(r, c, p));
  }
  CHECK(ds->describe(5) == t.file(dir + "data_batch_3.bin") + "[1]");
  const Sample gray = open_dataset("cifar10", t.dir.string(), "train", 1)->get(3);
  REQUIRE(gray.image.channels == 1);
  const uint8_t px[3] = {cifar_pixel(3, 0, 40), cifar_pixel(3, 1, 40), cifar_pixel(3, 2, 40)};
  CHECK(gray.image.pixels[40] == pil_luma(px));

  write_bytes(t.file(dir + "batches.meta.txt"), "a\nb\nc\nd\ne\nf\ng\nh\ni\nj \n\n");
  auto test = open_dataset("cifar10", t.file(dir), "val", 3);
  CHECK(test->size() == 3);
  CHECK(test->classes()[9] == "j");
}

TEST_CASE("cifar100: fine labels, numeric default names; bad sizes are errors", "[cifar]") {
  TempDir t;
  write_bytes(t.file("train.bin"), cifar_records(0, 4, true));
  auto ds = open_dataset("cifar100", t.dir.string(), "train", 3);
  REQUIRE(ds->size() == 4);
  CHECK(ds->classes().size() == 100);
  CHECK(ds->classes()[42] == "42");
  CHECK(ds->get(3).label == 21);
  CHECK(ds->get(3).image.at(0, 1)[2] == cifar_pixel(3, 2, 1));

  write_bytes(t.file("train.bin"), cifar_records(0, 4, true) + "x");
  CHECK_THROWS_AS(open_dataset("cifar100", t.dir.string(), "train", 3), DataError);
  CHECK_THROWS_WITH(open_dataset("cifar100", t.dir.string(), "train", 3),
                    Contains(t.file("train.bin")) && Contains("12297 bytes") && Contains("record size 3074"));
  CHECK_THROWS_WITH(open_dataset("cifar10", t.dir.string(), "train", 3),
                    Contains("data_batch_1.bin") && Contains("not found"));
  CHECK_THROWS_WITH(open_dataset("cifar100", t.dir.string(), "test", 3), Contains("test.bin"));
}

// ---- ImageFolder ------------------------------------------------------------------------------

TEST_CASE("imagefolder: sorted classes and files, case-insensitive extensions, hidden files ignored", "[folder]") {
  TempDir t;
  const Image img = pattern(4, 4, 3);
  write_png(t.file("train/dog/b.PNG"), img);
  write_png(t.file("train/dog/a.jpg"), img);  // a PNG named .jpg: content decides
  write_png(t.file("train/dog/nested/c.Jpeg"), img);
  write_png(t.file("train/dog/.hidden.jpg"), img);
  write_png(t.file("train/dog/.cache/d.jpg"), img);
  write_bytes(t.file("train/dog/notes.txt"), "not an image");
  write_png(t.file("train/Cat/z.bmp"), img);
  write_png(t.file("train/cat/x.png"), img);
  write_png(t.file("train/.git/y.png"), img);
  write_png(t.file("val/cat/v.png"), img);

  auto ds = open_dataset("", t.dir.string(), "train", 3);
  CHECK(ds->classes() == std::vector<std::string>{"Cat", "cat", "dog"});  // byte order, as sorted()
  REQUIRE(ds->size() == 5);
  const std::string root = t.dir.string() + "/train/";
  CHECK(ds->describe(0) == root + "Cat/z.bmp");
  CHECK(ds->describe(1) == root + "cat/x.png");
  CHECK(ds->describe(2) == root + "dog/a.jpg");
  CHECK(ds->describe(3) == root + "dog/b.PNG");
  CHECK(ds->describe(4) == root + "dog/nested/c.Jpeg");
  const std::vector<int64_t> labels{0, 1, 2, 2, 2};
  for (int64_t i = 0; i < 5; ++i) CHECK(ds->label(i) == labels[i]);
  const Sample s = ds->get(2);
  CHECK(s.label == 2);
  CHECK(max_abs_diff(s.image, img) == 0);
  CHECK(open_dataset("folder", t.dir.string(), "val", 1)->get(0).image.channels == 1);
  // No split folder inside: the root itself is the dataset.
  CHECK(open_dataset("imagefolder", t.dir.string() + "/val", "val", 3)->size() == 1);
}

TEST_CASE("imagefolder: missing folder, no classes, empty class, missing split are errors", "[folder]") {
  TempDir t;
  CHECK_THROWS_WITH(open_dataset("", t.file("absent"), "train", 3), Contains("absent") && Contains("does not exist"));
  write_png(t.file("flat/a.png"), pattern(2, 2, 3));
  CHECK_THROWS_WITH(open_dataset("", t.file("flat"), "train", 3), Contains("no class folders in " + t.file("flat")));
  write_png(t.file("data/train/cat/a.png"), pattern(2, 2, 3));
  fs::create_directories(t.dir / "data/train/dog");
  write_bytes(t.file("data/train/dog/readme.md"), "");
  CHECK_THROWS_WITH(open_dataset("", t.file("data"), "train", 3),
                    Contains(t.file("data/train/dog")) && Contains("has no images"));
  CHECK_THROWS_WITH(open_dataset("", t.file("data"), "val", 3), Contains("no val/ folder"));
}

TEST_CASE("detect_dataset: a data folder alone says what it holds, as timm's train.py reads it", "[folder]") {
  TempDir t;
  write_png(t.file("photos/train/cat/a.png"), pattern(2, 2, 3));
  CHECK(detect_dataset(t.file("photos")).name == "folder");
  CHECK_THAT(detect_dataset(t.file("photos")).reason, Contains("image folder"));
  write_bytes(t.file("digits/train-images-idx3-ubyte.gz"), "");
  CHECK(detect_dataset(t.file("digits")).name == "mnist");
  CHECK_THAT(detect_dataset(t.file("digits")).reason, Contains("train-images-idx3-ubyte.gz"));
  write_bytes(t.file("my-fashion/raw/train-images-idx3-ubyte"), "");
  CHECK(detect_dataset(t.file("my-fashion")).name == "fashion_mnist");
  write_bytes(t.file("tv/FashionMNIST/raw/train-images-idx3-ubyte"), "");
  CHECK(detect_dataset(t.file("tv")).name == "fashion_mnist");
  write_bytes(t.file("tv2/MNIST/raw/train-images-idx3-ubyte"), "");
  CHECK(detect_dataset(t.file("tv2")).name == "mnist");
  write_bytes(t.file("c10/cifar-10-batches-bin/data_batch_1.bin"), "");
  CHECK(detect_dataset(t.file("c10")).name == "cifar10");
  write_bytes(t.file("c100/train.bin"), "");
  CHECK(detect_dataset(t.file("c100")).name == "cifar100");
  CHECK_THROWS_WITH(detect_dataset(t.file("absent")), Contains("absent") && Contains("does not exist"));
}

// ---- loader -----------------------------------------------------------------------------------

TEST_CASE("loader: the same batches with 0, 1 and 3 workers; every sample once per epoch", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(103);
  std::vector<Collected> runs;
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, index_and_draw, quiet(8, workers));
    REQUIRE(loader.batches_per_epoch() == 13);
    runs.push_back(run_epoch(loader, 2));
  }
  for (const auto& r : runs) {
    CHECK(r.images == runs[0].images);
    CHECK(r.labels == runs[0].labels);
  }
  const Collected& c = runs[0];
  CHECK(c.batch_index == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  CHECK(c.images.back().size() == 7 * 2);
  const std::vector<int64_t> items = c.items();
  CHECK(std::set<int64_t>(items.begin(), items.end()).size() == 103);
  int64_t k = 0;
  for (const auto& b : c.labels)
    for (int64_t label : b) CHECK(label == items[k++] % 5);
  // The order is the documented one and each position gets its own stream.
  DataLoader loader(ds, index_and_draw, quiet(8, 0));
  CHECK(items == loader.epoch_order(2));
  const std::vector<float> draws = c.draws();
  for (int64_t p : {0, 50, 102}) CHECK(draws[p] == static_cast<float>(SampleRng(7, 2, p).uniform()));
}

TEST_CASE("loader: a writing transform decodes each sample straight into its slot of the batch", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(37, std::set<int64_t>{5, 6});
  // The same function in both forms; the writer also records where it was asked to write.
  std::mutex mu;
  std::set<const float*> written;
  const SampleTransform writer({2, 1, 1}, [&](const EncodedImage& e, SampleRng& rng, float* out) {
    const Tensor t = index_and_draw(e, rng);
    std::copy(t.data<float>(), t.data<float>() + 2, out);
    std::lock_guard<std::mutex> lock(mu);
    written.insert(out);
  });
  REQUIRE(writer.writes_in_place());
  CHECK(writer.output_shape() == Shape{2, 1, 1});
  for (int workers : {0, 2}) {
    DataLoader returning(ds, index_and_draw, quiet(8, workers));
    DataLoader writing(ds, writer, quiet(8, workers));
    const Collected a = run_epoch(returning, 1), b = run_epoch(writing, 1);
    CHECK(a.images == b.images);  // corrupt items 5 and 6 replaced by the same rule
    CHECK(a.labels == b.labels);
    CHECK(writing.skipped_in_epoch() == 2);
  }
  // Every write went to a slot of a batch: batch.images's memory at j * 2 floats.
  DataLoader loader(ds, writer, quiet(8, 0));
  loader.start_epoch(0);
  written.clear();
  const std::optional<Batch> batch = loader.next();
  REQUIRE(batch.has_value());
  const float* base = batch->images.data<float>();
  std::set<const float*> slots;
  for (int64_t j = 0; j < 8; ++j) slots.insert(base + 2 * j);
  CHECK(written == slots);
  // The writer's own tensor form, and its refusal of a shapeless or empty writer.
  SampleRng rng(7, 0, 0);
  CHECK(writer(EncodedImage(ds->get(3).image), rng).shape() == Shape{2, 1, 1});
  CHECK_THROWS_WITH(SampleTransform(Shape{2, 1}, [](const EncodedImage&, SampleRng&, float*) {}),
                    Contains("[C, H, W]"));
  const SampleTransform returning_only = index_and_draw;
  CHECK_THROWS_WITH(returning_only.write(EncodedImage(ds->get(3).image), rng, nullptr), Contains("no output shape"));
}

TEST_CASE("loader: workers and prefetch sized for the machine when left to -1 and 0", "[loader]") {
  CHECK(auto_workers(16, true) == 15);  // feeding a GPU: every core but one
  CHECK(auto_workers(64, true) == 32);
  CHECK(auto_workers(1, true) == 1);
  CHECK(auto_workers(2, false) == 1);  // on the CPU: a quarter, 1 to 4
  CHECK(auto_workers(16, false) == 4);
  CHECK(auto_workers(64, false) == 4);
  const int64_t batch = 128 * 3 * 224 * 224 * 4;  // 77 MB
  CHECK(auto_prefetch(1, batch) == 4);            // at least 4 batches in flight
  CHECK(auto_prefetch(3, batch) == 2);
  CHECK(auto_prefetch(15, batch) == 1);
  CHECK(auto_prefetch(2, int64_t{600} << 20) == 1);  // 2 x 2 x 600 MB would pass 2 GiB
  CHECK(auto_prefetch(0, batch) == 1);
  CHECK(usable_cores() >= 1);
  auto ds = std::make_shared<CountingDataset>(10);
  LoaderOptions o = quiet(4, 0);
  o.workers = -1;
  o.prefetch = 0;
  DataLoader loader(ds, index_and_draw, o);
  CHECK(loader.options().workers == auto_workers(usable_cores(), false));
  CHECK(loader.options().prefetch == auto_prefetch(loader.options().workers, 4 * 3 * 224 * 224 * 4));
  o.workers = -2;
  CHECK_THROWS_WITH(DataLoader(ds, index_and_draw, o), Contains("-1 to size them for the machine"));
}

TEST_CASE("loader: epochs shuffle differently, shuffle off keeps order, drop_last", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(10);
  DataLoader loader(ds, index_and_draw, quiet(4, 2));
  const auto e0 = run_epoch(loader, 0).items(), e1 = run_epoch(loader, 1).items();
  CHECK(e0 != e1);
  CHECK(run_epoch(loader, 0).items() == e0);
  DataLoader other_seed(ds, index_and_draw, quiet(4, 2, 8));
  CHECK(run_epoch(other_seed, 0).items() != e0);

  LoaderOptions o = quiet(4, 1);
  o.shuffle = false;
  o.drop_last = true;
  DataLoader ordered(ds, index_and_draw, o);
  CHECK(ordered.batches_per_epoch() == 2);
  const Collected c = run_epoch(ordered, 3);
  CHECK(c.items() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("loader: resuming at batch k equals the tail of the full epoch and skips decoding", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(50);
  DataLoader loader(ds, index_and_draw, quiet(6, 2));
  const Collected full = run_epoch(loader, 4);
  ds->gets = 0;
  const Collected tail = run_epoch(loader, 4, 5);
  CHECK(ds->gets == 50 - 5 * 6);
  REQUIRE(tail.images.size() == full.images.size() - 5);
  for (size_t b = 0; b < tail.images.size(); ++b) {
    CHECK(tail.batch_index[b] == full.batch_index[b + 5]);
    CHECK(tail.images[b] == full.images[b + 5]);
    CHECK(tail.labels[b] == full.labels[b + 5]);
  }
  CHECK(run_epoch(loader, 4, loader.batches_per_epoch()).images.empty());
  CHECK_THROWS_WITH(loader.start_epoch(4, 10), Contains("skip_batches 10"));
}

TEST_CASE("loader: corrupt samples are skipped deterministically and counted; strict throws", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(40, std::set<int64_t>{3, 17, 18});
  std::vector<Collected> runs;
  for (int workers : {0, 3}) {
    DataLoader loader(ds, index_and_draw, quiet(8, workers));
    runs.push_back(run_epoch(loader, 1));
    CHECK(loader.skipped_in_epoch() == 3);
    CHECK(loader.skipped_paths() == std::vector<std::string>{"item3", "item17", "item18"});
  }
  CHECK(runs[0].images == runs[1].images);
  // The fill rule: slot p takes the first readable item at positions p+1, ... with p's stream.
  DataLoader loader(ds, index_and_draw, quiet(8, 0));
  const std::vector<int64_t> order = loader.epoch_order(1);
  const std::vector<int64_t> items = runs[0].items();
  const std::vector<float> draws = runs[0].draws();
  REQUIRE(items.size() == 40);
  for (int64_t p = 0; p < 40; ++p) {
    int64_t q = p;
    while (order[q % 40] == 3 || order[q % 40] == 17 || order[q % 40] == 18) ++q;
    CHECK(items[p] == order[q % 40]);
    CHECK(draws[p] == static_cast<float>(SampleRng(7, 1, p).uniform()));
  }

  LoaderOptions strict = quiet(8, 2);
  strict.strict = true;
  strict.shuffle = false;
  DataLoader strict_loader(ds, index_and_draw, strict);
  strict_loader.start_epoch(0);
  CHECK_THROWS_AS(strict_loader.next(), DataError);  // batch 0 = items 0..7 holds item 3
  strict_loader.start_epoch(0, 1);
  CHECK(strict_loader.next().has_value());
  CHECK_THROWS_WITH(strict_loader.next(), Contains("item17") && Contains("broken on purpose"));
}

TEST_CASE("loader: a truncated JPEG in an image folder is reported with its path and skipped", "[loader]") {
  TempDir t;
  for (int i = 0; i < 3; ++i) write_png(t.file("a/" + std::to_string(i) + ".png"), pattern(4, 4, 3));
  const std::string jpeg = encode_jpeg(pattern(32, 32, 3), TJPF_RGB, TJSAMP_420);
  write_bytes(t.file("b/bad.jpg"), jpeg.substr(0, jpeg.size() / 2));
  auto ds = open_dataset("", t.dir.string(), "train", 3);
  auto to_tensor = [](const EncodedImage& encoded, SampleRng&) {
    const Image img = encoded.decode();
    Tensor out = Tensor::empty({img.channels, img.height, img.width});
    for (int64_t c = 0; c < img.channels; ++c)
      for (int64_t i = 0; i < img.height * img.width; ++i)
        out.data<float>()[c * img.height * img.width + i] = img.pixels[i * img.channels + c] / 255.0f;
    return out;
  };
  LoaderOptions o = quiet(4, 2);
  DataLoader loader(ds, to_tensor, o);
  const Collected c = run_epoch(loader, 0);
  REQUIRE(c.labels.size() == 1);
  CHECK(c.labels[0] == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(loader.skipped_in_epoch() == 1);
  CHECK(loader.skipped_paths() == std::vector<std::string>{t.file("b/bad.jpg")});
  o.strict = true;
  DataLoader strict(ds, to_tensor, o);
  strict.start_epoch(0);
  CHECK_THROWS_WITH(strict.next(), Contains(t.file("b/bad.jpg")) && Contains("truncated"));
}

TEST_CASE("loader: repeated augmentation repeats each index in a row, epoch length kept", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(14);
  LoaderOptions o = quiet(5, 2);
  o.repeats = 3;
  DataLoader loader(ds, index_and_draw, o);
  CHECK(loader.batches_per_epoch() == 3);
  const Collected c = run_epoch(loader, 0);
  const std::vector<int64_t> items = c.items();
  REQUIRE(items.size() == 14);
  std::map<int64_t, int> seen;
  for (int64_t k = 0; k < 14; ++k) {
    CHECK(items[k] == items[k - k % 3]);  // runs of 3 copies
    ++seen[items[k]];
  }
  CHECK(seen.size() == 5);  // ceil(14 / 3) indices, the last one cut to 2 copies
  const std::vector<float> draws = c.draws();
  CHECK(draws[0] != draws[1]);  // each copy is augmented differently
  o.shuffle = false;
  DataLoader ordered(ds, index_and_draw, o);
  CHECK(ordered.epoch_order(0) == std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4});
}

TEST_CASE("loader: worker exceptions reach next() at their batch; bad transform shapes", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(20);
  auto boom = [](const EncodedImage& img, SampleRng& rng) {
    if (img.decode().pixels[0] == 13) throw std::runtime_error("boom at 13");
    return index_and_draw(img, rng);
  };
  LoaderOptions o = quiet(4, 3);
  o.shuffle = false;
  DataLoader loader(ds, boom, o);
  loader.start_epoch(0);
  for (int b = 0; b < 3; ++b) CHECK(loader.next()->index == b);
  CHECK_THROWS_WITH(loader.next(), Contains("boom at 13"));
  CHECK(loader.next()->index == 4);
  CHECK_FALSE(loader.next().has_value());

  auto ragged = [](const EncodedImage& img, SampleRng&) {
    return Tensor::empty({1, 1, img.decode().pixels[0] % 2 + 1});
  };
  DataLoader bad(ds, ragged, o);
  bad.start_epoch(0);
  CHECK_THROWS_WITH(bad.next(), Contains("[1, 1, 2]") && Contains("[1, 1, 1]") && Contains("same shape"));
  CHECK_THROWS_WITH(DataLoader(ds, Transform(), o), Contains("no transform"));
  LoaderOptions bad_options = o;
  bad_options.repeats = -1;
  CHECK_THROWS_WITH(DataLoader(ds, index_and_draw, bad_options), Contains("repeats must be >= 0"));
  bad_options = o;
  bad_options.rank = 2;
  bad_options.world_size = 2;
  CHECK_THROWS_WITH(DataLoader(ds, index_and_draw, bad_options), Contains("rank 2 is not in [0, world_size 2)"));
  bad_options = o;
  bad_options.prefetch = -1;
  CHECK_THROWS_WITH(DataLoader(ds, index_and_draw, bad_options), Contains("prefetch must be >= 1"));
  DataLoader fresh(ds, index_and_draw, o);
  CHECK_THROWS_WITH(fresh.next(), Contains("start_epoch"));
}

TEST_CASE("loader: destruction and restart mid-epoch stop the workers promptly", "[loader]") {
  auto ds = std::make_shared<CountingDataset>(4000);
  auto slow = [](const EncodedImage& img, SampleRng& rng) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return index_and_draw(img, rng);
  };
  const auto start = std::chrono::steady_clock::now();
  {
    DataLoader loader(ds, slow, quiet(16, 3));
    loader.start_epoch(0);
    REQUIRE(loader.next().has_value());
    loader.start_epoch(1);  // abandons epoch 0 with batches in flight
    REQUIRE(loader.next()->index == 0);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 2.0);
  CHECK(ds->gets < 400);  // nowhere near the 4000 of a whole epoch
}

// ---- the real Fashion-MNIST ---------------------------------------------------------------------

TEST_CASE("fashion-mnist: Debian's dataset-fashion-mnist opens, and the loader keeps up", "[fashion]") {
  const std::string root = kFashionMnistDefaultRoot;
  if (!fs::is_directory(root))
    FAIL("Fashion-MNIST not found at " << root << ": install the Debian package dataset-fashion-mnist");
  auto train = open_dataset("fashion_mnist", "", "train", 1);
  auto test = open_dataset("torch/fashion_mnist", root, "val", 3);
  REQUIRE(train->size() == 60000);
  REQUIRE(test->size() == 10000);
  CHECK(train->classes() == fashion_mnist_classes());
  // Reference values read with Python's gzip module from the same files.
  const std::vector<int64_t> first_labels{9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
  for (int64_t i = 0; i < 10; ++i) CHECK(train->label(i) == first_labels[i]);
  CHECK(test->get(1).label == 2);
  const Sample s0 = train->get(0);
  REQUIRE(s0.image.height == 28);
  REQUIRE(s0.image.width == 28);
  int64_t sum = 0;
  for (uint8_t v : s0.image.pixels) sum += v;
  CHECK(sum == 76247);
  CHECK(s0.image.at(10, 13)[0] == 193);
  CHECK(test->get(0).image.channels == 3);

  // Throughput with a trivial transform (x / 255 into [1, 28, 28]).
  auto to_tensor = [](const EncodedImage& encoded, SampleRng&) {
    const Image img = encoded.decode();
    Tensor t = Tensor::empty({1, img.height, img.width});
    float* d = t.data<float>();
    for (size_t i = 0; i < img.pixels.size(); ++i) d[i] = img.pixels[i] * (1.0f / 255.0f);
    return t;
  };
  LoaderOptions o = quiet(256, 2);
  DataLoader loader(train, to_tensor, o);
  std::vector<int64_t> counts(10, 0);
  const auto start = std::chrono::steady_clock::now();
  loader.start_epoch(0);
  int64_t batches = 0;
  while (auto b = loader.next()) {
    ++batches;
    for (int64_t label : b->labels.to_vector<int64_t>()) ++counts[label];
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(batches == 235);
  CHECK(counts == std::vector<int64_t>(10, 6000));
  std::printf("fashion-mnist loader, 2 workers, batch 256: %.0f batches/s, %.0f images/s\n", batches / seconds,
              60000 / seconds);
}
