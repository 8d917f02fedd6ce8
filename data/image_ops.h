// Geometric and photometric primitives on 8-bit HWC images (data/image.h), reproducing what
// Pillow 9.4 does for the same call, because timm/torchvision augment PIL images and a model
// trained here should see the pixels it would have seen there. Every function below names the
// PIL call it reproduces; tests/test_transforms.cpp checks them against PIL pixel by pixel.
//
// Resampling (resize): Pillow's separable convolution (libImaging/Resample.c). The filter is
// the triangle (bilinear, support 1) or Keys' cubic with a = -0.5 (bicubic, support 2); when
// downscaling by s > 1 the filter is stretched by s (support s or 2s), which is PIL's
// antialiasing. Coefficients are normalised to sum 1 and quantised to 22-bit fixed point;
// the horizontal pass runs first and rounds to 8 bits, then the vertical pass. Implementing the
// same fixed-point arithmetic makes the results bit-identical to PIL, not just close.
//
// Affine warps (affine, rotate): Pillow's Image.transform(AFFINE) / Image.rotate
// (libImaging/Geometry.c). Output pixel centre (x + .5, y + .5) maps to input
// (a x' + b y' + c, d x' + e y' + f); outside the input the fill colour is kept; inside, a
// 2x2 bilinear or a 4x4 cubic (a = -1, PIL's transform kernel, unlike its resize kernel) with
// edge clamping, truncated to 8 bits.
//
// Photometric ops: ImageOps (autocontrast, equalize, posterize, solarize, invert) as 256-entry
// lookup tables, and ImageEnhance (Brightness, Contrast, Color, Sharpness) as PIL's
// Image.blend(degenerate, image, factor) = trunc(d + factor * (v - d)) in float, clipped to
// [0, 255] when the factor is outside [0, 1]. Grey levels are ITU-R 601-2 luma in 16-bit fixed
// point, (19595 R + 38470 G + 7471 B + 2^15) >> 16, as PIL's convert("L").
//
// Images have 1 (grey) or 3 (RGB) channels; ops that need colour (enhance_color) leave grey
// images unchanged, exactly as PIL does for mode "L".
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "tessera/data/image.h"

namespace tessera::data {

enum class Interpolation { Bilinear, Bicubic };

// "bilinear" / "bicubic" (the names timm and torchvision use); throws for anything else.
Interpolation parse_interpolation(const std::string& name);
const char* interpolation_name(Interpolation interp);

// A rectangle in pixel coordinates; it may extend past the image where a function says so.
struct Box {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// A rectangle with fractional edges: a Box of a larger image mapped onto a reduced copy of it.
struct Window {
  double top = 0, left = 0, height = 0, width = 0;
};

// A fill colour; 1-channel images use the first entry.
using Fill = std::array<uint8_t, 3>;

// ---- geometry ----------------------------------------------------------------------------------

// The pixels of `box`, which must lie inside the image (PIL Image.crop).
Image crop(const Image& img, const Box& box);

enum class PadMode { Constant, Reflect, Edge };
// torchvision.transforms.functional.pad as it works on PIL images: "constant" (fill), "reflect"
// (mirror without repeating the edge pixel: numpy's "reflect"), "edge" (repeat the edge pixel).
PadMode parse_pad_mode(const std::string& name);
// The pixels of `box` in the image padded on every side by enough pixels: equivalent to padding
// and then cropping, without building the padded image. Reflect needs the overhang to be smaller
// than the image side.
Image crop_padded(const Image& img, const Box& box, PadMode mode, const Fill& fill = {0, 0, 0});

// PIL Image.resize((out_w, out_h), filter): bit-identical to Pillow (see the file comment).
Image resize(const Image& img, int64_t out_h, int64_t out_w, Interpolation interp);

// Crop `window` (inside the image), resize it to out_h x out_w, and return the `out_region`
// part of the result (default: all of it). Equal to torchvision's resized_crop (crop, then PIL
// resize, the filter clamped at the window's edges) followed by a crop, but computes only the
// output pixels that are kept. `out_region` must lie inside [0, out_h) x [0, out_w).
Image resized_crop(const Image& img, const Box& window, int64_t out_h, int64_t out_w, Interpolation interp,
                   const Box* out_region = nullptr);

// resized_crop of a window with fractional edges (inside the image): the filter's centres follow
// the window exactly (as Pillow's resize with a float box), its taps are clamped to the whole
// pixels the window touches, as they are to a crop's edges. A window with whole-pixel edges gives
// resized_crop's result exactly. What a reduced decode (data/encoded_image.h) resamples from.
Image resized_crop_fractional(const Image& img, const Window& window, int64_t out_h, int64_t out_w,
                              Interpolation interp, const Box* out_region = nullptr);

// Mirror in place (PIL transpose FLIP_LEFT_RIGHT / FLIP_TOP_BOTTOM).
void hflip(Image& img);
void vflip(Image& img);

// PIL Image.transform(size, AFFINE, m, resample, fillcolor=fill) with the output the size of
// the input: m = (a, b, c, d, e, f) maps output (x, y) to input (a x + b y + c, d x + e y + f).
Image affine(const Image& img, const std::array<double, 6>& m, Interpolation interp, const Fill& fill);

// PIL Image.rotate(degrees, resample, fillcolor=fill): counter-clockwise about the image centre,
// same output size (expand=False).
Image rotate(const Image& img, double degrees, Interpolation interp, const Fill& fill);

// ---- colour space ------------------------------------------------------------------------------

// PIL convert("L") of an RGB image (a copy for a grey one).
Image to_grayscale(const Image& img);
// PIL convert("RGB") of a grey image (a copy for an RGB one).
Image to_rgb(const Image& img);

// ---- lookup-table ops (ImageOps), in place -----------------------------------------------------

using Lut = std::array<uint8_t, 256>;
// The same table for every channel.
void apply_lut(Image& img, const Lut& lut);
void invert(Image& img);                                      // 255 - v
void posterize(Image& img, int bits);                         // keep the `bits` high bits (bits >= 8: unchanged)
void solarize(Image& img, int threshold);                     // v >= threshold -> 255 - v
void solarize_add(Image& img, int add, int threshold = 128);  // v < threshold -> min(255, v + add)
void autocontrast(Image& img);                                // per channel: stretch [min, max] to [0, 255]
void equalize(Image& img);                                    // per channel histogram equalisation

// ---- ImageEnhance, in place --------------------------------------------------------------------

void enhance_brightness(Image& img, double factor);  // blend with black
void enhance_contrast(Image& img, double factor);    // blend with the mean grey level
void enhance_color(Image& img, double factor);       // blend with the grey image (saturation)
void enhance_sharpness(Image& img, double factor);   // blend with PIL's SMOOTH 3x3 filter

}  // namespace tessera::data
