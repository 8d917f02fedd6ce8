#!/usr/bin/env bash
# Tessera as a dependency: installs the Release build (build/, made by scripts/test.sh) into a
# temporary prefix, checks that the installed headers are complete, builds
# examples/custom_attention against the installed CMake package as a user's project would, and runs
# it: gradient checks of its new attention, a few training steps on Fashion-MNIST, validation and
# an attention map of the trained model; its attention as a model file's token mixer, trained and
# explained. Then the README's two-file project as printed there (no
# C++ standard set), and a static-library consumer that sets C++17. Usage: scripts/test_install.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix" >/dev/null
# Every "tessera/..." include of an installed header names an installed header (nothing of ops/cpu/,
# tools/ or tests/ leaks into the public interface).
missing=0
while IFS= read -r -d '' header; do
  while IFS= read -r included; do
    if [ ! -f "$prefix/include/$included" ]; then
      echo "test_install: ${header#"$prefix"/} includes $included, which is not installed" >&2
      missing=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(tessera\/[^"]*\)".*/\1/p' "$header")
done < <(find "$prefix/include/tessera" -name '*.h' -print0)
[ "$missing" -eq 0 ]
"$prefix/bin/tessera" --version

example="$prefix/example"
cmake -S examples/custom_attention -B "$example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$example"
run="$example/custom_attention"
"$run" check-gradients
"$run" models | grep -qx linear_vit_tiny
"$run" inspect --model linear_vit_tiny --in-chans 1 --img-size 28 --num-classes 10
"$run" train --model linear_vit_tiny --in-chans 1 --img-size 28 --epochs 1 -b 32 --max-train-batches 8 \
  --max-eval-batches 2 --workers 0 --output "$prefix/run"
"$run" validate --model linear_vit_tiny --img-size 28 --checkpoint "$prefix/run/last.safetensors" -b 250 --workers 0
"$run" attention-map --model linear_vit_tiny --img-size 28 --weights "$prefix/run/last.safetensors" --image tests/data/cmyk_pil.jpg --output "$prefix/maps"
ls "$prefix/maps" | grep -q '^mean.png$'
# Its token mixer in a model file: listed, trained, explained (docs/models.md "Your own token mixer").
"$run" models --mixers | grep -qx linear_attention
hybrid=examples/custom_attention/linear_xca_hybrid.yaml
"$run" train --model "$hybrid" --epochs 1 -b 32 --max-train-batches 4 --max-eval-batches 1 --workers 0 \
  --output "$prefix/hybrid-run"
"$run" explain --checkpoint "$prefix/hybrid-run" --image tests/data/cmyk_pil.jpg --output "$prefix/hybrid.html"
grep -q "blocks.0 own_attention head 0" "$prefix/hybrid.html"  # the linear attention's implied map
# The README's "Use it from your own project", exactly as printed there: its cmake and cpp blocks,
# no C++ standard set (g++ 12 defaults to C++17; the targets must ask for C++20 themselves).
readme_project="$prefix/readme-project"
mkdir -p "$readme_project"
section=$(sed -n '/^## Use it from your own project/,/^## /p' README.md)
sed -n '/^```cmake$/,/^```$/p' <<< "$section" | sed '1d;$d' > "$readme_project/CMakeLists.txt"
sed -n '/^```cpp$/,/^```$/p' <<< "$section" | sed '1d;$d' > "$readme_project/main.cpp"
[ -s "$readme_project/CMakeLists.txt" ] && [ -s "$readme_project/main.cpp" ] ||
  { echo "test_install: the README's project blocks (cmake, cpp) were not found" >&2; exit 1; }
if grep -q CMAKE_CXX_STANDARD "$readme_project/CMakeLists.txt"; then
  echo "test_install: the README's project sets a C++ standard; the targets must carry it" >&2
  exit 1
fi
cmake -S "$readme_project" -B "$readme_project/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$readme_project/build" >/dev/null
"$readme_project/build/app" | grep -Eq '^class [0-9] of 10$'
# The static library, in a project that asks for C++17 explicitly (Tessera's C++20 must win): a
# model built by name runs forward.
static_project="$prefix/static-project"
mkdir -p "$static_project"
cat > "$static_project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(static_check LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Tessera REQUIRED)
add_executable(static_check main.cpp)
target_link_libraries(static_check PRIVATE Tessera::tessera_static)
CMAKE
cat > "$static_project/main.cpp" <<'CPP'
#include <cstdio>
#include <tessera/models/registry.h>
#include <tessera/ops/ops.h>
#include <tessera/version.h>
int main() {
  auto model = tessera::models::create_model("xcit_nano_12_p16_224", {.num_classes = 3, .img_size = 32});
  model->eval();
  tessera::Tensor logits = model->forward(tessera::randn({2, 3, 32, 32}));
  std::printf("static Tessera %s: logits [%lld, %lld]\n", TESSERA_VERSION_STRING,
              static_cast<long long>(logits.size(0)), static_cast<long long>(logits.size(1)));
  return logits.size(0) == 2 && logits.size(1) == 3 ? 0 : 1;
}
CPP
cmake -S "$static_project" -B "$static_project/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$static_project/build" >/dev/null
if ldd "$static_project/build/static_check" | grep -q libtessera; then
  echo "test_install: static_check links libtessera.so, not the static library" >&2
  exit 1
fi
"$static_project/build/static_check"
echo "test_install: the installed package builds and runs examples/custom_attention, the README's project and a" \
     "static program asking for C++17"
