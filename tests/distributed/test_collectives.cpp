// The MPI communicator, the gradient reducer, the differentiable sum behind --sync-bn and the
// start-of-run agreement check, on 2 ranks (`mpirun --oversubscribe -np 2`).
#include <catch2/catch.hpp>

#include <cmath>

#include "mpi_world.h"
#include "tessera/nn/layers.h"
#include "tessera/ops/ops.h"
#include "tessera/train/distributed/agreement.h"
#include "tessera/train/distributed/reducer.h"
#include "tessera/train/distributed/sync_batch_norm.h"

using namespace tessera;
using namespace tessera::train::dist;
using testing::world;

namespace {

// Values that differ by rank: element i of rank r is i + 100 r (+ 0.25 so floats are not integers).
Tensor ranked(int64_t n, DType dtype, int rank) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<double>(i + 100 * rank) + (is_floating(dtype) ? 0.25 : 0);
  return from_vector(v, {n}).to(dtype);
}

std::vector<double> values(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }

}  // namespace

TEST_CASE("allreduce, broadcast, allgather, reduce-scatter and barrier on odd sizes and every dtype", "[mpi]") {
  Communicator& comm = *world();
  REQUIRE(comm.size() == 2);
  const int r = comm.rank();
  for (int64_t n : {1, 7, 1001}) {
    for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
      INFO("n " << n << " dtype " << dtype_name(dt));
      const double frac = is_floating(dt) ? 0.25 : 0;
      Tensor sum = ranked(n, dt, r);
      comm.allreduce(sum, ReduceOp::Sum);
      Tensor mx = ranked(n, dt, r), mn = ranked(n, dt, r);
      comm.allreduce(mx, ReduceOp::Max);
      comm.allreduce(mn, ReduceOp::Min);
      Tensor b = ranked(n, dt, r);
      comm.broadcast(b, 1);
      Tensor gathered = Tensor::empty({2 * n}, dt);
      comm.allgather(ranked(n, dt, r), gathered);
      Tensor scattered = Tensor::empty({n}, dt);
      comm.reduce_scatter(ranked(2 * n, dt, r), scattered, ReduceOp::Sum);
      for (int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<size_t>(i);
        CHECK(values(sum)[k] == 2 * i + 100 + 2 * frac);
        CHECK(values(mx)[k] == i + 100 + frac);
        CHECK(values(mn)[k] == i + frac);
        CHECK(values(b)[k] == i + 100 + frac);
        CHECK(values(gathered)[k] == i + frac);
        CHECK(values(gathered)[static_cast<size_t>(n + i)] == i + 100 + frac);
        const int64_t j = r * n + i;  // this rank's chunk of the 2n inputs
        CHECK(values(scattered)[k] == 2 * j + 100 + 2 * frac);
      }
      if (is_floating(dt)) {
        Tensor avg = ranked(n, dt, r);
        comm.allreduce(avg, ReduceOp::Avg);
        CHECK(values(avg)[static_cast<size_t>(n - 1)] == n - 1 + 50 + frac);
      }
    }
  }
  // Several in flight at once, waited for out of order.
  Tensor a = ranked(5, DType::Float32, r), c = ranked(3, DType::Float64, r);
  auto wa = comm.allreduce_async(a, ReduceOp::Sum);
  auto wc = comm.allreduce_async(c, ReduceOp::Max);
  auto wb = comm.barrier_async();
  wb->wait();
  wc->wait();
  wa->wait();
  CHECK(values(a)[4] == 2 * 4 + 100 + 0.5);
  CHECK(values(c)[2] == 102.25);
  CHECK(comm.broadcast_string(r == 0 ? "from rank 0" : "ignored", 0) == "from rank 0");
}

TEST_CASE("collectives refuse operands they cannot reduce, naming the operation", "[mpi][errors]") {
  Communicator& comm = *world();
  Tensor strided = zeros({4, 4}).transpose(0, 1);
  CHECK_THROWS_WITH(comm.allreduce(strided, ReduceOp::Sum), Catch::Contains("mpi allreduce: expected a contiguous"));
  CHECK_THROWS_WITH(comm.allreduce(zeros({3}).to(DType::BFloat16), ReduceOp::Sum),
                    Catch::Contains("bfloat16 tensors are not reduced by the MPI backend"));
  CHECK_THROWS_WITH(comm.allreduce(zeros({3}, DType::Int64), ReduceOp::Avg), Catch::Contains("cannot be averaged"));
  CHECK_THROWS_WITH(comm.allgather(zeros({3}), zeros({5})), Catch::Contains("expected an output of 6 float32"));
  CHECK_THROWS_WITH(comm.broadcast(zeros({3}), 2), Catch::Contains("root 2 is not a rank of 2"));
}

namespace {

// Parameters of odd sizes; the loss gives parameter i of rank r the gradient coefficient(i, r).
std::vector<Tensor> odd_parameters() {
  std::vector<Tensor> params;
  for (int64_t n : {3, 17, 1, 40, 9, 250}) params.push_back(zeros({n}).set_requires_grad());
  return params;
}
float coefficient(size_t i, int rank) { return static_cast<float>(i + 1) * (rank == 0 ? 1.0f : 3.0f); }

Tensor loss_of(const std::vector<Tensor>& params, int rank, const std::vector<bool>& used) {
  Tensor loss = zeros({});
  for (size_t i = 0; i < params.size(); ++i)
    if (used[i]) loss = loss + (params[i] * static_cast<double>(coefficient(i, rank))).sum();
  return loss;
}

}  // namespace

TEST_CASE("the reducer averages gradients in many buckets, sent while backward runs", "[mpi]") {
  Communicator& comm = *world();
  std::vector<Tensor> params = odd_parameters();
  GradReducer reducer(comm, params, /*bucket_bytes=*/100);  // 25 floats: several buckets
  CHECK(reducer.num_buckets() >= 4);
  CHECK(reducer.bucket_params(0).front() == 5);  // reverse order: the last parameter goes first
  for (int step = 0; step < 2; ++step) {
    reducer.prepare(true);
    loss_of(params, comm.rank(), std::vector<bool>(params.size(), true)).backward();
    reducer.finish();
    CHECK(reducer.buckets_sent_during_backward() == reducer.num_buckets());
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> g = params[i].grad().to_vector<float>();
      for (float v : g) CHECK(v == (coefficient(i, 0) + coefficient(i, 1)) / 2);
    }
    for (Tensor& p : params) p.set_grad(Tensor());
  }
}

TEST_CASE("a parameter with no gradient on one rank counts as zero; on every rank it keeps none", "[mpi]") {
  Communicator& comm = *world();
  std::vector<Tensor> params = odd_parameters();
  GradReducer reducer(comm, params, 100);
  std::vector<bool> used(params.size(), true);
  used[1] = comm.rank() == 0;  // used by rank 0 only
  used[4] = false;             // used by no rank
  reducer.prepare(true);
  loss_of(params, comm.rank(), used).backward();
  reducer.finish();
  for (float v : params[1].grad().to_vector<float>()) CHECK(v == coefficient(1, 0) / 2);
  CHECK_FALSE(params[4].grad().defined());
  for (float v : params[5].grad().to_vector<float>()) CHECK(v == (coefficient(5, 0) + coefficient(5, 1)) / 2);
}

TEST_CASE("accumulation micro-steps keep gradients local; the last one averages the sums", "[mpi]") {
  Communicator& comm = *world();
  std::vector<Tensor> params = odd_parameters();
  GradReducer reducer(comm, params, 100);
  const std::vector<bool> all(params.size(), true);
  reducer.prepare(false);
  loss_of(params, comm.rank(), all).backward();
  reducer.finish();
  CHECK(reducer.buckets_sent_during_backward() == 0);
  CHECK(params[2].grad().to_vector<float>()[0] == coefficient(2, comm.rank()));  // still this rank's own
  reducer.prepare(true);
  loss_of(params, comm.rank(), all).backward();
  reducer.finish();
  CHECK(params[2].grad().to_vector<float>()[0] == coefficient(2, 0) + coefficient(2, 1));  // mean of 2 sums of 2
}

TEST_CASE("all_reduce_sum is differentiable: the gradient is the sum of the ranks' gradients", "[mpi]") {
  const int r = world()->rank();
  Tensor x = from_vector(std::vector<double>{1.0 + r, 2.0 + r}, {2}).set_requires_grad();
  const Tensor y = all_reduce_sum(x * x, world());  // [1 + 4, 4 + 9] on both ranks
  CHECK(y.to_vector<double>() == std::vector<double>{5, 13});
  (y * static_cast<double>(r + 1)).sum().backward();  // rank weights 1 and 2: dL/dy = 3 in all
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2 * (1.0 + r) * 3, 2 * (2.0 + r) * 3});
}

TEST_CASE("synchronized batch norm over two half-batches equals batch norm over the whole batch", "[mpi]") {
  const int r = world()->rank();
  manual_seed(7);
  const Tensor full_x = randn({6, 3, 4, 5}, DType::Float64) * 2.0 + 1.5;  // the same on both ranks
  const Tensor upstream = randn({6, 3, 4, 5}, DType::Float64);
  nn::BatchNorm2d whole(3), synced(3);
  for (nn::BatchNorm2d* bn : {&whole, &synced}) bn->to(DType::Float64);
  {
    NoGradGuard no_grad;
    whole.weight.copy_(from_vector(std::vector<double>{0.5, 1.0, 2.0}, {3}));
    synced.weight.copy_(whole.weight);
  }
  REQUIRE(convert_sync_batchnorm(synced, world()) == 1);
  Tensor x_all = full_x.clone().set_requires_grad();
  Tensor y_all = whole.forward(x_all);
  (y_all * upstream).sum().backward();
  Tensor x_half = full_x.narrow(0, 3 * r, 3).clone().set_requires_grad();
  Tensor y_half = synced.forward(x_half);
  (y_half * upstream.narrow(0, 3 * r, 3)).sum().backward();

  auto close = [](const Tensor& a, const Tensor& b) { return amax(abs(a - b)).item() < 1e-10; };
  CHECK(close(y_half, y_all.narrow(0, 3 * r, 3)));
  CHECK(close(x_half.grad(), x_all.grad().narrow(0, 3 * r, 3)));
  CHECK(close(synced.running_mean, whole.running_mean));
  CHECK(close(synced.running_var, whole.running_var));
  // The weight's gradient summed over ranks is the whole batch's.
  Tensor wg = synced.weight.grad().clone();
  world()->allreduce(wg, ReduceOp::Sum);
  CHECK(close(wg, whole.weight.grad()));
}

TEST_CASE("ranks that disagree at start all stop with the difference named", "[mpi][errors]") {
  Communicator& comm = *world();
  CHECK_NOTHROW(check_agreement(comm, {{"model", "xcit_nano_12_p16_224"}, {"lr", "0.001"}}));
  const Facts facts{{"model", "xcit_nano_12_p16_224"}, {"lr", comm.rank() == 0 ? "0.001" : "0.002"}};
  CHECK_THROWS_WITH(check_agreement(comm, facts), Catch::Contains("rank 1 has lr = 0.002 where rank 0 has lr = 0.001"));
}
