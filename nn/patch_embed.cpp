#include "tessera/nn/patch_embed.h"

#include "tessera/nn/lpi.h"
#include "tessera/ops/ops.h"

namespace tessera::nn {

ConvPatchEmbed::ConvPatchEmbed(int64_t p, int64_t d, int64_t in_chans) : patch_size(p) {
  TS_CHECK(p == 4 || p == 8 || p == 16, "ConvPatchEmbed: patch size must be 4, 8 or 16, got ", p);
  const int64_t steps = p == 16 ? 4 : p == 8 ? 3 : 2;
  TS_CHECK(d % (int64_t{1} << (steps - 1)) == 0, "ConvPatchEmbed: embed dim ", d, " must be divisible by ",
           int64_t{1} << (steps - 1), " for patch size ", p);
  proj = register_module("proj", std::make_shared<Sequential>());
  int64_t in = in_chans;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t out = d >> (steps - 1 - s);
    auto unit = std::make_shared<Sequential>();
    unit->push_back(std::make_shared<Conv2d>(in, out, std::array<int64_t, 2>{3, 3}, std::array<int64_t, 2>{2, 2},
                                             std::array<int64_t, 2>{1, 1}, 1, /*bias=*/false));
    unit->push_back(std::make_shared<BatchNorm2d>(out));
    proj->push_back(unit);
    if (s + 1 < steps) proj->push_back(std::make_shared<GELU>());
    in = out;
  }
}

// Runs `proj` on images whose sides are multiples of the patch size; returns tokens.
static Tensor embed(Module& proj, const Tensor& x, int64_t patch_size, const char* op, int64_t* grid_h,
                    int64_t* grid_w) {
  TS_CHECK(x.dim() == 4, op, ": expected images [B, C, H, W], got ", x.shape());
  TS_CHECK(x.size(2) % patch_size == 0 && x.size(3) % patch_size == 0, op, ": image size ", x.size(2), "x", x.size(3),
           " is not a multiple of the patch size ", patch_size);
  Tensor m = proj.forward(x);
  *grid_h = m.size(2);
  *grid_w = m.size(3);
  return map_to_tokens(m);
}

Tensor ConvPatchEmbed::forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w) {
  ForwardScope scope(*this);
  return scope.output(embed(*proj, x, patch_size, "ConvPatchEmbed", grid_h, grid_w));
}

PatchEmbed::PatchEmbed(int64_t p, int64_t in_chans, int64_t d) : patch_size(p) {
  TS_CHECK(p > 0, "PatchEmbed: patch size must be positive, got ", p);
  proj = register_module(
      "proj", std::make_shared<Conv2d>(in_chans, d, std::array<int64_t, 2>{p, p}, std::array<int64_t, 2>{p, p}));
}

Tensor PatchEmbed::forward(const Tensor& x, int64_t* grid_h, int64_t* grid_w) {
  ForwardScope scope(*this);
  return scope.output(embed(*proj, x, patch_size, "PatchEmbed", grid_h, grid_w));
}

}  // namespace tessera::nn
