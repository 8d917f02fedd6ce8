// create_transform: the per-sample function the loader calls (Image -> float32 [C, H, W]),
// assembled as timm's transforms_factory does (timm/data/transforms_factory.py,
// transforms_imagenet_train / transforms_imagenet_eval).
//
// Training: primary crop, flips, then RandAugment (auto_augment = "rand-...") or else colour
// jitter, then ToTensor + Normalize, then random erasing on the normalized tensor:
//   primary "rrc"      RandomResizedCrop(img_size, scale, ratio, interpolation)   (timm default)
//   primary "crop_pad" RandomCrop(img_size, padding=crop_padding, crop_padding_mode) -- the
//                      standard CIFAR recipe (DeiT's for input_size <= 32), for images already
//                      at (or near) the target size; torchvision's default padding is constant 0
//   primary "none"     Resize(img_size) of the shorter side + CenterCrop(img_size): timm's
//                      --no-aug primary (set hflip = 0 and color_jitter = 0 for all of --no-aug)
// Evaluation: Resize the shorter side to floor(img_size / crop_pct) + CenterCrop(img_size)
// (224 at crop_pct 0.875 resizes to 256), ToTensor, Normalize.
//
// Interpolation: "bicubic" by default (what the pretrained configs of XCiT, CaiT, CoaT and DeiT
// use for evaluation, and what their training recipes pass); "random" (timm train.py's
// --train-interpolation default) picks bilinear or bicubic per image for the crop and per op in
// RandAugment, and is for training only.
// Images whose channel count differs from in_chans are converted first as PIL's convert("RGB")
// or convert("L") would (timm opens images in the mode in_chans implies).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/data/encoded_image.h"
#include "tessera/data/image.h"
#include "tessera/data/rng.h"
#include "tessera/data/sample_transform.h"
#include "tessera/data/transforms.h"

namespace tessera::data {

struct TransformOptions {
  int64_t img_size = 224;
  int64_t in_chans = 3;
  bool is_training = false;

  // Training geometry.
  std::string primary = "rrc";  // "rrc", "crop_pad" or "none"
  std::array<double, 2> scale = {0.08, 1.0};
  std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  int64_t crop_padding = 4;                    // crop_pad only
  std::string crop_padding_mode = "constant";  // crop_pad only: "constant" (0), "reflect", "edge"
  double hflip = 0.5;
  double vflip = 0.0;

  // Training colour.
  double color_jitter = 0.4;  // brightness = contrast = saturation strength; 0 disables
  std::string auto_augment;   // "" or a RandAugment string ("rand-m9-mstd0.5-inc1"); disables jitter

  std::string interpolation = "bicubic";       // "bilinear", "bicubic", or "random" (training only)
  std::vector<double> mean = imagenet_mean();  // one entry per channel (1-channel data: pass its own)
  std::vector<double> std = imagenet_std();
  double crop_pct = 0.875;  // evaluation

  // Random erasing (training, after normalization).
  double reprob = 0.0;
  std::string remode = "pixel";
  int64_t recount = 1;
};

// Validates the options (throws tessera::Error naming the bad option) and returns the transform: a
// writer of [in_chans, img_size, img_size] samples (data/sample_transform.h), which takes the image
// undecoded (an Image converts implicitly) and decodes only what its crop needs. Safe to call from
// several threads at once.
SampleTransform create_transform(const TransformOptions& options);

}  // namespace tessera::data
