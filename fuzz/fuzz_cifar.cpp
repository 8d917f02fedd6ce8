// CIFAR binary batches through open_cifar_dataset: record size, label range, samples read back.
// The first byte chooses CIFAR-10 (test_batch.bin) or CIFAR-100 (test.bin).
#include "tessera/data/dataset.h"
#include "fuzz/check_message.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int classes = (data[0] & 1) ? 100 : 10;
  const std::filesystem::path dir = tessera::fuzz::scratch_dir() / ("cifar" + std::to_string(classes));
  tessera::fuzz::write_file("cifar" + std::to_string(classes) + (classes == 10 ? "/test_batch.bin" : "/test.bin"),
                            data + 1, size - 1);
  try {
    const auto dataset = tessera::data::open_cifar_dataset(dir.string(), false, classes, 3);
    for (int64_t i : {int64_t{0}, dataset->size() - 1}) {
      (void)dataset->get(i);
      (void)dataset->label(i);
      (void)dataset->describe(i);
    }
  } catch (const tessera::Error& e) { tessera::fuzz::check_message(e); }
  return 0;
}
