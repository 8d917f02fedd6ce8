// Samples of interpolate, bilinear and bicubic: up and down by integer and non-integer factors,
// mixed per axis, down to 1x1, a size-1 input axis, planes larger than a block, float64 (to 1e-12),
// an empty batch.
#include "tests/op_samples/op_info.h"

namespace tessera::testing {

std::vector<OpInfo> interpolate_ops() {
  return {
      {OpId::interpolate, [] {
         struct Resize {
           const char* name;
           Tensor x;
           std::array<int64_t, 2> size;
           DeviceCheckOptions device;
         };
         const Tensor a = randu({2, 3, 6, 8}), b = randu({1, 2, 7, 5}), x64 = randu({2, 2, 5, 6}).to(DType::Float64);
         const DeviceCheckOptions tight{.rtol = 1e-12, .atol = 1e-12};
         // Bicubic's negative lobes make a gradient element a sum of terms that cancel, gathered per
         // input pixel on a GPU and scattered per output row on the CPU: float32 rounding is then
         // relative to the largest gradient, not to the element (on an H100, with fused
         // multiply-adds, an element 1/50 of the largest differed by 7e-5 of itself).
         const DeviceCheckOptions cancelling{.relative_to_max = true};
         const Resize resizes[] = {
             {"2x up", a, {12, 16}, {}},
             {"2x down", a, {3, 4}, {}},
             {"same size", a, {6, 8}, {}},
             {"up 7x5 -> 11x13", b, {11, 13}, {}},
             {"down 7x5 -> 3x2", b, {3, 2}, {}},
             {"mixed 7x5 -> 4x9", b, {4, 9}, {}},
             {"far down 7x5 -> 1x1", b, {1, 1}, {}},
             {"size-1 axis", randu({2, 1, 1, 5}), {3, 7}, {}},  // every tap clamps onto it
             {"large planes", randu({1, 2, 19, 23}), {37, 29}, cancelling},
             {"float64 up", x64, {9, 13}, tight},
             {"float64 down", x64, {3, 4}, tight},
             {"empty batch", randu({0, 3, 4, 4}), {5, 6}, {}},
         };
         std::vector<SampleInput> s;
         for (const Resize& r : resizes)
           for (InterpolationMode mode : {InterpolationMode::Bilinear, InterpolationMode::Bicubic})
             s.push_back({std::string(r.name) + (mode == InterpolationMode::Bilinear ? ", bilinear" : ", bicubic"),
                          {r.x},
                          [size = r.size, mode](const Inputs& in) { return interpolate(in[0], size, mode); },
                          r.device});
         // H and W swapped through a permuted view.
         for (InterpolationMode mode : {InterpolationMode::Bilinear, InterpolationMode::Bicubic})
           s.push_back(
               {mode == InterpolationMode::Bilinear ? "a permuted input, bilinear" : "a permuted input, bicubic",
                {randu({2, 2, 3, 4})},
                [mode](const Inputs& in) {
                  return interpolate(in[0].permute({0, 1, 3, 2}), {5, 2}, mode);
                }});
         return s;
       }}};
}

}  // namespace tessera::testing
