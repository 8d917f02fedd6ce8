// .npy reading and writing (io/npy.h) against files NumPy wrote (tests/data/npy, made by
// np.save / numpy.lib.format.write_array; the calls are listed next to each check).
#include <cstdio>
#include <fstream>
#include <iterator>

#include "tessera/io/npy.h"
#include "gradcheck.h"

using namespace tessera;

namespace {
const std::string kDir = std::string(TESSERA_TEST_DATA_DIR) + "/npy/";

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("read_npy reads NumPy's files", "[npy]") {
  // np.save('f32_2x3.npy', np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
  Tensor a = io::read_npy(kDir + "f32_2x3.npy");
  CHECK(a.dtype() == DType::Float32);
  CHECK(a.shape() == Shape{2, 3});
  CHECK(a.to_vector<float>() == std::vector<float>{0, .25f, .5f, .75f, 1, 1.25f});
  // The same array written as format version 2.0 (a 4-byte header length).
  CHECK(io::read_npy(kDir + "f32_v2.npy").to_vector<float>() == a.to_vector<float>());
  // np.save('i64_4.npy', np.array([3, -1, 7, 0], dtype=np.int64))
  Tensor i = io::read_npy(kDir + "i64_4.npy");
  CHECK(i.dtype() == DType::Int64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{3, -1, 7, 0});
  // np.save('f64_scalar.npy', np.array(2.5)): a 0-d array.
  Tensor s = io::read_npy(kDir + "f64_scalar.npy");
  CHECK(s.dim() == 0);
  CHECK(s.item() == 2.5);
}

TEST_CASE("write_npy writes what np.save writes, byte for byte", "[npy]") {
  const std::string out = "test_npy_roundtrip.npy";
  io::write_npy(out, io::read_npy(kDir + "f32_2x3.npy"));
  CHECK(file_bytes(out) == file_bytes(kDir + "f32_2x3.npy"));
  io::write_npy(out, io::read_npy(kDir + "i64_4.npy"));
  CHECK(file_bytes(out) == file_bytes(kDir + "i64_4.npy"));
  io::write_npy(out, io::read_npy(kDir + "f64_scalar.npy"));
  CHECK(file_bytes(out) == file_bytes(kDir + "f64_scalar.npy"));
  // A non-contiguous view is written in logical order.
  Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).t();
  io::write_npy(out, t);
  Tensor back = io::read_npy(out);
  CHECK(back.shape() == Shape{3, 2});
  CHECK(back.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  std::remove(out.c_str());
}

TEST_CASE("read_npy rejects what it cannot read, naming the file", "[npy]") {
  CHECK_THROWS_WITH(io::read_npy(kDir + "missing.npy"), Catch::Contains("missing.npy"));
  // np.save('fortran.npy', np.asfortranarray(a))
  CHECK_THROWS_WITH(io::read_npy(kDir + "fortran.npy"), Catch::Contains("fortran.npy") && Catch::Contains("Fortran"));
  // np.save('big_endian.npy', a.astype('>f4'))
  CHECK_THROWS_WITH(io::read_npy(kDir + "big_endian.npy"), Catch::Contains("'>f4'") && Catch::Contains("<f4"));
  // np.save('u8.npy', np.zeros(3, np.uint8))
  CHECK_THROWS_WITH(io::read_npy(kDir + "u8.npy"), Catch::Contains("u8.npy") && Catch::Contains("'|u1'"));
  // Not a .npy file at all, and a truncated one.
  const std::string bad = "test_npy_bad.npy";
  { std::ofstream(bad) << "hello, world"; }
  CHECK_THROWS_WITH(io::read_npy(bad), Catch::Contains("not a .npy file"));
  const std::string full = file_bytes(kDir + "f32_2x3.npy");
  { std::ofstream(bad, std::ios::binary) << full.substr(0, full.size() - 4); }
  CHECK_THROWS_WITH(io::read_npy(bad),
                    Catch::Contains("truncated") && Catch::Contains("needs 24 data bytes, the file has 20"));
  std::remove(bad.c_str());
}
