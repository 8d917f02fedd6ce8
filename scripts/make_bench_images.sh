#!/usr/bin/env bash
# Builds the photograph set the input-pipeline benchmark reads (scripts/bench_data.sh,
# docs/benchmarks.md): ImageNet-sized JPEGs (500x375, quality 90, 4:2:0, as PIL saves them) cut
# from the nature photographs Debian's mate-backgrounds package ships (12 photographs of up to
# 5640x3172), each photograph scaled to shorter sides of 1125, 1500 and 1875 pixels and cut on a
# half-overlapping grid. Real photographs, not synthetic gradients; but wallpapers, so smoother
# than ImageNet's average photograph (the script prints the mean file size to compare with
# ImageNet's). Writes DIR/photos/NNNNN.jpg (an image folder of one class).
# usage: scripts/make_bench_images.sh [DIR]   (default: build-bench-images; kept out of git)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-bench-images}
bash scripts/setup.sh mate-backgrounds python3-pil
rm -rf "$out/photos"
mkdir -p "$out/photos"
/usr/bin/python3 - "$out/photos" <<'PY'
import glob, os, sys
from PIL import Image
out = sys.argv[1]
sources = sorted(glob.glob("/usr/share/backgrounds/mate/nature/*.jpg"))
assert sources, "mate-backgrounds' photographs are missing"
n = 0
for path in sources:
    photo = Image.open(path).convert("RGB")
    for short in (1125, 1500, 1875):
        s = short / min(photo.size)
        if s > 1:
            continue  # never enlarge: an upscaled photograph has less detail than its size says
        img = photo.resize((round(photo.width * s), round(photo.height * s)), Image.LANCZOS)
        for y in range(0, img.height - 375 + 1, 187):
            for x in range(0, img.width - 500 + 1, 250):
                img.crop((x, y, x + 500, y + 375)).save(f"{out}/{n:05d}.jpg", quality=90, subsampling=2)
                n += 1
total = sum(os.path.getsize(p) for p in glob.glob(f"{out}/*.jpg"))
print(f"make_bench_images: {n} JPEGs of 500x375 from {len(sources)} photographs in {out}, "
      f"{total / n / 1024:.0f} KB each on average (ImageNet's training images average about 110 KB)")
PY
