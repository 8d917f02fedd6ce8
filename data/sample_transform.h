// The per-sample function a data loader applies: an image (undecoded: data/encoded_image.h) and
// the sample's random stream in, a float32 [C, H, W] tensor out. It comes in two forms:
//   - any callable that returns a new tensor (a test's lambda, a user's custom transform);
//   - a writer that declares its output shape up front and writes into memory it is given, which
//     is what create_transform builds (data/pipeline.h). The loader then decodes each sample
//     straight into its slot of the batch: no tensor per sample, and, once the first batches have
//     come back to the allocator, no allocation for the batch either (the pinned cache, or the
//     host allocator, hands the same blocks out again).
#pragma once
#include <functional>
#include <type_traits>
#include <utility>

#include "tessera/core/shape.h"
#include "tessera/core/tensor.h"
#include "tessera/data/encoded_image.h"
#include "tessera/data/rng.h"

namespace tessera::data {

class SampleTransform {
 public:
  using Returning = std::function<Tensor(const EncodedImage&, SampleRng&)>;
  // Writes one sample into `out`, which holds numel(output_shape) floats, contiguous.
  using Writing = std::function<void(const EncodedImage&, SampleRng&, float* out)>;

  SampleTransform() = default;
  // Any callable (const EncodedImage&, SampleRng&) -> Tensor. Implicit, so that a lambda passes as
  // a transform.
  template <class F, class = std::enable_if_t<std::is_invocable_r_v<Tensor, F&, const EncodedImage&, SampleRng&> &&
                                              !std::is_same_v<std::decay_t<F>, SampleTransform>>>
  SampleTransform(F f) : returning_(std::move(f)) {}  // NOLINT(google-explicit-constructor)
  SampleTransform(Shape output_shape, Writing write);

  explicit operator bool() const { return static_cast<bool>(returning_) || static_cast<bool>(writing_); }
  bool writes_in_place() const { return static_cast<bool>(writing_); }
  // A writer's shape, [C, H, W]; empty for a returning transform (its shape shows in its result).
  const Shape& output_shape() const { return output_shape_; }

  // The sample as a new tensor, whichever the form.
  Tensor operator()(const EncodedImage& image, SampleRng& rng) const;
  // A writer's sample into `out` (numel(output_shape()) floats); an error for a returning transform.
  void write(const EncodedImage& image, SampleRng& rng, float* out) const;

 private:
  Returning returning_;
  Writing writing_;
  Shape output_shape_;
};

}  // namespace tessera::data
