// SampleTransform (data/sample_transform.h).
#include "tessera/data/sample_transform.h"

#include "tessera/core/error.h"

namespace tessera::data {

SampleTransform::SampleTransform(Shape output_shape, Writing write)
    : writing_(std::move(write)), output_shape_(std::move(output_shape)) {
  TS_CHECK(static_cast<bool>(writing_), "SampleTransform: no function to write the samples with");
  TS_CHECK(output_shape_.size() == 3 && numel_of(output_shape_) > 0,
           "SampleTransform: expected a non-empty [C, H, W] output shape, got ", output_shape_);
}

Tensor SampleTransform::operator()(const EncodedImage& image, SampleRng& rng) const {
  if (returning_) return returning_(image, rng);
  TS_CHECK(static_cast<bool>(writing_), "SampleTransform: called empty");
  Tensor out = Tensor::empty(output_shape_, DType::Float32);
  writing_(image, rng, out.data<float>());
  return out;
}

void SampleTransform::write(const EncodedImage& image, SampleRng& rng, float* out) const {
  TS_CHECK(static_cast<bool>(writing_),
           "SampleTransform::write: this transform returns its tensors; it has no output shape to write into");
  writing_(image, rng, out);
}

}  // namespace tessera::data
