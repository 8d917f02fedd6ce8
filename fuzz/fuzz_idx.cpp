// MNIST IDX files (plain or gzipped) through open_idx_dataset: magic, the claimed sizes against
// the bytes present, counts of images and labels, label range, and samples read back. The first
// byte chooses which of the two files the rest of the input is; the other is a valid file of two
// items, so the cross-file checks are reached.
#include "tessera/data/dataset.h"
#include "fuzz/check_message.h"
#include "fuzz/fuzz_input.h"

namespace {

constexpr uint8_t kImages[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8};
constexpr uint8_t kLabels[] = {0, 0, 8, 1, 0, 0, 0, 2, 3, 9};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool fuzz_images = (data[0] & 1) != 0;
  tessera::fuzz::write_file("idx/t10k-images-idx3-ubyte", fuzz_images ? data + 1 : kImages,
                            fuzz_images ? size - 1 : sizeof kImages);
  tessera::fuzz::write_file("idx/t10k-labels-idx1-ubyte", fuzz_images ? kLabels : data + 1,
                            fuzz_images ? sizeof kLabels : size - 1);
  try {
    const auto dataset =
        tessera::data::open_idx_dataset((tessera::fuzz::scratch_dir() / "idx").string(), false, true, 3);
    for (int64_t i : {int64_t{0}, dataset->size() - 1}) {
      (void)dataset->get(i);
      (void)dataset->label(i);
    }
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
