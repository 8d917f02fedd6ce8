// The pictures of `tessera attention-map`: an attention map over a patch grid shown on the image
// it was computed from, at the image's own size (not the model's crop), as the papers draw them
// (XCiT Fig. 4, CaiT Fig. 5), with a colorbar.
#pragma once
#include <array>
#include <cstdint>

#include "tessera/core/tensor.h"
#include "tessera/data/image.h"
#include "tessera/data/image_ops.h"

namespace tessera::cli {

// Of the heat colour in a pixel blended over the image (the rest is the image).
constexpr double kHeatWeight = 0.55;

// A perceptual blue -> green -> yellow -> red ramp for a value in [0, 1], as RGB in [0, 1].
std::array<double, 3> heat_color(double v);

// The square the evaluation transform (resize the shorter side to floor(img_size / crop_pct),
// center-crop img_size) keeps of a height x width image, in that image's pixel coordinates.
data::Box eval_crop_in_image(int64_t height, int64_t width, int64_t img_size, double crop_pct);

// How many columns the colorbar adds to the right of an image `height` pixels high (a white gap
// and the bar).
int64_t colorbar_width(int64_t height);

// `map` [gh, gw] stretched (bilinear) over `crop` of `image` and blended over it in a blue ->
// green -> yellow -> red ramp from the map's minimum to its maximum; the image is shown in gray
// for a 1-channel image and in colour for a 3-channel one, dimmed outside the crop (the part the
// model did not see). Returns RGB, image.height x (image.width + colorbar_width(image.height)),
// the colorbar's top the maximum.
data::Image attention_picture(const Tensor& map, const data::Image& image, const data::Box& crop);

}  // namespace tessera::cli
