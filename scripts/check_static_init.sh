#!/usr/bin/env bash
# The objects given hold no dynamic initialisation (CTest's "static initialisation: ..." test): no
# namespace-scope object there is built by code run before main(). Such an object is initialised in
# an order across translation units that nothing fixes, so another unit's initialiser can read it
# still empty: the op sample table's optimizer lists once did, and every optimizer-step test on cuda
# then compared nothing (issue 46). Data that other translation units read is constant-initialised
# or built on first use (a function-local static). GCC and Clang name each unit's initialiser
# _GLOBAL__sub_I_<file>. Usage: check_static_init.sh OBJECT...
set -euo pipefail
bad=()
for object in "$@"; do
  symbols=$(nm "$object")  # (not piped into grep -q: its early exit would fail nm under pipefail)
  if grep -q "_GLOBAL__sub_I_" <<<"$symbols"; then bad+=("$object"); fi
done
if ((${#bad[@]})); then
  echo "FAIL: dynamic initialisation (a namespace-scope object built before main) in:"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "PASS: $# objects, none with dynamic initialisation"
