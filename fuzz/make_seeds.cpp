// Writes the seed corpus of every harness: tiny valid inputs made by Tessera's own writers (and
// libjpeg-turbo's encoder), so each harness starts where its parser accepts and mutates from
// there. Usage: fuzz_make_seeds <corpus folder>  (writes <folder>/<harness>/seed-*).
#include <turbojpeg.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tessera/data/encode.h"
#include "tessera/io/npy.h"
#include "fuzz/training_state.h"
#include "tessera/io/safetensors.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

fs::path g_root;

void seed(const std::string& harness, const std::string& name, const std::string& bytes) {
  fs::create_directories(g_root / harness);
  std::ofstream(g_root / harness / ("seed-" + name), std::ios::binary) << bytes;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

fs::path scratch(const std::string& name) { return fs::temp_directory_path() / ("tessera_seeds_" + name); }

// The bytes a writer that takes a path produces.
template <class Write>
std::string written(const std::string& name, Write write) {
  const fs::path path = scratch(name);
  write(path.string());
  std::string bytes = file_bytes(path);
  fs::remove(path);
  return bytes;
}

std::string gzipped(const std::string& bytes) {
  return written("gz", [&](const std::string& path) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  });
}

data::Image pattern(int64_t h, int64_t w, int64_t c) {
  data::Image img(h, w, c);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<uint8_t>(i * 37 % 251);
  return img;
}

std::string jpeg(const data::Image& img, int subsamp, int flags) {
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int format = img.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  if (img.channels == 1) subsamp = TJSAMP_GRAY;
  tjCompress2(tj, img.pixels.data(), static_cast<int>(img.width), 0, static_cast<int>(img.height), format, &out, &size,
              subsamp, 90, flags);
  std::string bytes(reinterpret_cast<char*>(out), size);
  tjFree(out);
  tjDestroy(tj);
  return bytes;
}

void safetensors_seeds() {
  const auto st = [](const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& meta) {
    return written("st", [&](const std::string& path) { save_safetensors(path, tensors, meta); });
  };
  seed("safetensors", "dtypes",
       st({{"w", randn({2, 3})},
           {"i", arange(4)},
           {"b", full({3}, 1.0, DType::Bool)},
           {"h", randn({2}).to(DType::BFloat16)},
           {"d", randn({1}).to(DType::Float64)}},
          {{"format", "pt"}}));
  seed("safetensors", "empty-tensor", st({{"e", Tensor::empty({0, 4})}, {"s", full({}, 2.0)}}, {}));
  seed("safetensors", "no-tensors", st({}, {{"k", "v\n\u00e9"}}));
}

void npy_seeds() {
  const auto npy = [](const Tensor& t) {
    return written("npy", [&](const std::string& path) { io::write_npy(path, t); });
  };
  seed("npy", "f32-2x3", npy(randn({2, 3})));
  seed("npy", "i64-4", npy(arange(4)));
  seed("npy", "f64-scalar", npy(full({}, 1.5, DType::Float64)));
  std::string v2 = npy(randn({1, 2}));  // format 2.0: a 4-byte header length
  v2[6] = 2;
  v2.insert(10, std::string(1, '\0') + std::string(1, '\0'));
  seed("npy", "f32-v2", v2);
}

void idx_seeds() {
  std::string images{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2};
  for (int i = 0; i < 8; ++i) images += static_cast<char>(i * 30);
  const std::string labels{0, 0, 8, 1, 0, 0, 0, 2, 3, 9};
  seed("idx", "images", '\1' + images);
  seed("idx", "labels", '\0' + labels);
  seed("idx", "images-gz", '\1' + gzipped(images));
  seed("idx", "labels-gz", '\0' + gzipped(labels));
}

void cifar_seeds() {
  for (int classes : {10, 100}) {
    std::string records;
    for (int r = 0; r < 2; ++r) {
      if (classes == 100) records += static_cast<char>(r);  // coarse label
      records += static_cast<char>(r + 7);
      for (int p = 0; p < 3072; ++p) records += static_cast<char>((p * 13 + r) % 256);
    }
    seed("cifar", "cifar" + std::to_string(classes), std::string(1, classes == 10 ? '\0' : '\1') + records);
  }
}

void image_seeds() {
  seed("jpeg", "rgb-444", jpeg(pattern(8, 8, 3), TJSAMP_444, 0));
  seed("jpeg", "rgb-420", jpeg(pattern(16, 12, 3), TJSAMP_420, 0));
  seed("jpeg", "gray", jpeg(pattern(8, 8, 1), TJSAMP_GRAY, 0));
  seed("jpeg", "progressive", jpeg(pattern(8, 16, 3), TJSAMP_422, TJFLAG_PROGRESSIVE));
  const auto png = [](const data::Image& img) {
    return written("png", [&](const std::string& path) { data::write_png(path, img); });
  };
  seed("png", "rgb", png(pattern(4, 5, 3)));
  seed("png", "gray", png(pattern(3, 2, 1)));
  std::string ppm = "P6\n2 2\n255\n";
  for (int i = 0; i < 12; ++i) ppm += static_cast<char>(i * 20);
  seed("png", "ppm", ppm);
}

void json_seeds() {
  seed("json", "header", R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})");
  seed("json", "values",
       R"([null, true, false, -0.5e+3, 18446744073709551615, "a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", {}, [[]]])");
  seed("json", "unicode", "{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\": 1}  ");
}

void model_kwargs_seeds() {
  seed("model_kwargs", "xcit",
       "--model\nxcit_nano_12_p16_224\n--img-size\n16\n--model-kwargs\ndepth=1\nembed_dim=8\nnum_heads=2");
  seed("model_kwargs", "ufo",
       "--model\nufo_vit_t\n--img-size=16\n--num-classes\n4\n--model-kwargs\ndepth=1,embed_dim=8,num_heads=2,attn_dim="
       "4,mlp_ratio=2");
  seed("model_kwargs", "coat",
       "--model\ncoat_lite_tiny\n--img-size\n32\n--model-kwargs\nnum_heads=2\nparallel_depth=1\n--drop\n0.1");
  seed("model_kwargs", "cait",
       "--model\ncait_xxs24_224\n--img-size\n16\n--patch-size\n8\n--layer-scale\n0.1\n--model-kwargs\ndepth=1\nembed_"
       "dim=8\nnum_heads=1\n--device\ncpu");
}

void checkpoint_state_seeds() {
  const fuzz::TrainingState run;
  seed("checkpoint_state", "state", written("state", [&](const std::string& path) {
         save_safetensors(path, run.state_dict(), fuzz::TrainingState::state_metadata());
       }));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus folder>\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  manual_seed(0);
  safetensors_seeds();
  npy_seeds();
  idx_seeds();
  cifar_seeds();
  image_seeds();
  json_seeds();
  model_kwargs_seeds();
  checkpoint_state_seeds();
  std::printf("seeds written to %s\n", argv[1]);
  return 0;
}
