// Reductions: values against naive loops, the gradients at amax's ties and at norm's zero vector,
// keepdim and negative dims. Their float64 gradient checks are samples of the op table
// (tests/op_samples/reduce.cpp).
#include "gradcheck.h"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("sum and mean over dim sets match naive loops", "[reduce]") {
  Tensor x = arange(24).to(DType::Float64).reshape({2, 3, 4});
  CHECK(sum(x).item() == 276.0);
  CHECK(sum(x, {1}).shape() == Shape{2, 4});
  CHECK(sum(x, {1}).to_vector<double>() == std::vector<double>{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK(sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(sum(x, {0, 2}).to_vector<double>() == std::vector<double>{60, 92, 124});
  CHECK(sum(x, {-1}).to_vector<double>() == std::vector<double>{6, 22, 38, 54, 70, 86});
  CHECK(mean(x, {2}).to_vector<double>() == std::vector<double>{1.5, 5.5, 9.5, 13.5, 17.5, 21.5});
  CHECK(sum(x.permute({2, 0, 1}), {0}).to_vector<double>() == sum(x, {2}).to_vector<double>());
  CHECK(sum(zeros({0, 3})).item() == 0.0);
  // Leading dims (the bias-gradient path): rows accumulated into the output.
  CHECK(sum(x, {0}).to_vector<double>() == std::vector<double>{12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34});
  CHECK(sum(x, {0, 1}).to_vector<double>() == std::vector<double>{60, 66, 72, 78});
  CHECK(amax(x, {0, 1}).to_vector<double>() == std::vector<double>{20, 21, 22, 23});
  CHECK(amax(-x, {0}).to_vector<double>()[0] == 0.0);
  // Consecutive middle dims of a contiguous tensor ([outer, rows, cols], XCA's norms over the
  // tokens), against the same reduction with the dims moved last; narrow columns and many outer
  // indices, so threads' column segments cross from one outer index to the next.
  Generator gen(3);
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{37, 50, 3, 1}}) {
    INFO(shape_str(shape));
    const Tensor y = randn(shape, DType::Float64, &gen);
    const Tensor moved = y.permute({0, 3, 1, 2}).contiguous();
    CHECK(max_abs_diff(sum(y, {1, 2}), sum(moved, {2, 3})) < 1e-12);  // summed in another order
    CHECK(amax(y, {1}).to_vector<double>() == amax(y.permute({0, 2, 3, 1}).contiguous(), {3}).to_vector<double>());
  }
}

TEST_CASE("amax, argmax, var and norm", "[reduce]") {
  Tensor x = from_vector(std::vector<double>{1, 5, 3, 7, 2, 7}, {2, 3});
  CHECK(amax(x, {1}).to_vector<double>() == std::vector<double>{5, 7});
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // first of the tie
  CHECK(argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(var(x, {1}).to_vector<double>()[0] == Approx(4.0));
  CHECK(var(x, {1}, 0).to_vector<double>()[0] == Approx(8.0 / 3));
  CHECK(norm(x, {1}).to_vector<double>()[0] == Approx(std::sqrt(35.0)));
}

TEST_CASE("amax splits the gradient between ties; norm's gradient at zero is zero", "[reduce][autograd]") {
  Tensor x = from_vector(std::vector<double>{2, 2, 1}, {3}).set_requires_grad();
  amax(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0.5, 0.5, 0});
  Tensor z = zeros({2, 3}, DType::Float64).set_requires_grad();
  sum(norm(z, {1})).backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>(6, 0.0));
}

TEST_CASE("reduction errors", "[reduce][errors]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(sum(x, {2}), Catch::Contains("sum") && Catch::Contains("dim 2"));
  CHECK_THROWS_WITH(sum(x, {1, -1}), Catch::Contains("repeated"));
  CHECK_THROWS_WITH(amax(zeros({0, 2}), {0}), Catch::Contains("amax") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(var(zeros({1}), {0}), Catch::Contains("var"));
  CHECK_THROWS_WITH(sum_to(x, {4}), Catch::Contains("sum_to"));
}
