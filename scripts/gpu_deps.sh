#!/usr/bin/env bash
# Packs what a bare GPU machine lacks into .gpu-deps/, which the device tool carries along
# (`carry: [".gpu-deps"]`) and scripts/gpu_check.sh builds against. What goes in is derived, not
# listed: the GPU check's build is configured here (scripts/gpu_build_options.sh), CMake records
# every third-party path it settled on (build-gpu-probe/third_party.txt, cmake/ThirdParty.cmake),
# and the Debian packages those paths belong to are packed whole, with the runtime libraries the
# development links point to. Besides them: Fashion-MNIST, which the `cuda` tests and the loss
# curves train on. Absolute symbolic links are made relative, so the pack works wherever it lands
# (zlib's development link was absolute: the build then took the static libz.a, which cannot go into
# a shared library). .gpu-deps/third_party.txt
# is the recorded list, which gpu_check.sh hands back to CMake with paths inside the pack.
# Usage: scripts/gpu_deps.sh        (needs the CUDA toolkit here, as the CUDA configure does)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/gpu_build_options.sh
export PATH="$PATH:/usr/local/cuda/bin"

probe=build-gpu-probe
cmake -S . -B "$probe" -G Ninja "${gpu_build_options[@]}" >/dev/null
recorded=$probe/third_party.txt

# The package that owns a path (merged /usr: dpkg may know a library by its /lib name).
owner() {
  local path=$1 alt
  dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1 && return
  alt=${path#/usr}
  [ "$alt" != "$path" ] && dpkg -S "$alt" 2>/dev/null | head -1 | cut -d: -f1 && return
  echo "gpu_deps: no Debian package owns $path (recorded by the build in $recorded)" >&2
  return 1
}

declare -A packages=([dataset-fashion-mnist]=1)
while read -r entry file; do
  [ -n "$entry" ] || continue
  path=${entry#*=}
  packages[$(owner "$path${file:+/$file}")]=1
done < "$recorded"

rm -rf .gpu-deps
mkdir -p .gpu-deps
# Where a packed path goes: /lib/... is /usr/lib/... (merged /usr), whatever the package lists.
canonical() { local d; d=$(realpath -m "$(dirname "$1")"); echo "$d/$(basename "$1")"; }
declare -A packed=()
pack() {
  local pkg=$1 f dest
  while read -r f; do
    case "$f" in /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*) continue ;; esac
    [ -f "$f" ] || [ -L "$f" ] || continue
    dest=.gpu-deps$(canonical "$f")
    mkdir -p "$(dirname "$dest")"
    if [ -L "$f" ]; then
      # Relative to the link's own folder inside the pack, whatever the original said.
      ln -sfn "$(realpath -m --relative-to="$(realpath -m "$(dirname "$f")")" "$(realpath -m "$f")")" "$dest"
    else
      cp -p "$f" "$dest"
    fi
  done < <(dpkg -L "$pkg")
  packed[$pkg]=1
}
# Pack, then follow every link that leads out of the pack to the package that owns its target
# (a development link's runtime library, usually), until every link resolves inside.
while :; do
  for pkg in "${!packages[@]}"; do [ -n "${packed[$pkg]:-}" ] || pack "$pkg"; done
  more=0
  while IFS= read -r link; do
    resolved=$(realpath -m "$link")
    [ -e "$resolved" ] && continue
    system=${resolved#"$PWD/.gpu-deps"}
    if [[ $system == "$resolved" ]] || [ ! -e "$system" ]; then
      echo "gpu_deps: $link points to $resolved, which neither the pack nor this machine has" >&2
      exit 1
    fi
    pkg=$(owner "$system")
    [ -n "${packed[$pkg]:-}" ] && { echo "gpu_deps: $pkg does not provide $system" >&2; exit 1; }
    # Queued already this round: two links (libonnx.so, libonnx_proto.so) into one runtime package.
    [ -n "${packages[$pkg]:-}" ] && continue
    packages[$pkg]=1
    more=1
  done < <(find .gpu-deps -type l)
  [ "$more" -eq 1 ] || break
done
cp "$recorded" .gpu-deps/third_party.txt
printf '%s\n' "${!packages[@]}" | sort > .gpu-deps/packages.txt
echo "gpu_deps: $(du -sh .gpu-deps | cut -f1) in .gpu-deps/ from $(wc -l < .gpu-deps/packages.txt) packages:" \
     "$(tr '\n' ' ' < .gpu-deps/packages.txt)"
# What travels to a lent GPU machine is the tree plus carried folders, 64 MiB in all: a pack that
# no longer leaves room for the tree fails here, not at the call.
pack_bytes=$(du -sb .gpu-deps | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
if ((pack_bytes + tree_bytes > 60 * 1024 * 1024)); then
  echo "gpu_deps: .gpu-deps ($((pack_bytes >> 20)) MiB) and the tree ($((tree_bytes >> 20)) MiB) exceed the" \
       "60 MiB kept below the 64 MiB a GPU call carries" >&2
  exit 1
fi
