#!/usr/bin/env bash
# Packs what a bare GPU machine lacks — the build dependencies (Eigen, Catch2, stb, libjpeg-turbo,
# zlib headers and libraries) and the Fashion-MNIST files the data tests read, from this machine's
# Debian packages — into .gpu-deps/, which the device tool carries along (`carry: [".gpu-deps"]`)
# and scripts/gpu_check.sh uses where the system has none. About 48 MB. .gpu-deps/ is listed in
# .git/info/exclude so it never enters the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >> .git/info/exclude
rm -rf .gpu-deps
for pkg in libeigen3-dev catch2 libstb-dev libturbojpeg0-dev libturbojpeg0 zlib1g-dev dataset-fashion-mnist; do
  dpkg -L "$pkg" | while read -r f; do
    if [ -f "$f" ] || [ -L "$f" ]; then
      mkdir -p ".gpu-deps$(dirname "$f")"
      cp -a "$f" ".gpu-deps$f"
    fi
  done
done
echo "gpu_deps: $(du -sh .gpu-deps | cut -f1) in .gpu-deps/"
