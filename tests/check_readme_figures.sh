#!/usr/bin/env bash
# The README states one current figure for the main job (its accuracy and time, with the machine),
# the one docs/training.md calls today's; every other accuracy in the README belongs to another
# family, on a line that names it. Older figures live in docs/training.md's history.
# Usage: check_readme_figures.sh README.md docs/training.md
set -uo pipefail
readme=$1 training=$2
fail() { echo "FAIL: $*"; exit 1; }

mapfile -t stated < <(grep -o '\*\*[0-9][0-9.]*% test accuracy in [^*]*\*\*' "$readme")
[ "${#stated[@]}" -eq 1 ] || fail "$readme states the main job's figure (**N% test accuracy in T**) ${#stated[@]} times, expected once"
main=$(grep -o '^\*\*[0-9][0-9.]*%' <<< "${stated[0]}" | tr -d '*')
today=$(grep -A1 "^\*\*Today's figure\*\*" "$training" | grep -o '\*\*[0-9][0-9.]*% top-1' | head -1 | grep -o '[0-9][0-9.]*%')
[ -n "$today" ] || fail "$training has no '**Today's figure**' line with a '**N% top-1' figure"
[ "$main" = "$today" ] || fail "$readme states $main for the main job, $training calls $today today's figure"
grep -q "measured [0-9-]* on a " <<< "$(grep -A2 -F "${stated[0]}" "$readme" | tr '\n' ' ')" ||
  fail "$readme's main-job figure does not say when and on which machine it was measured ('measured DATE on a ...')"

# Every other accuracy (80-100%) sits on a line that names another family.
status=0
while IFS=: read -r line figure; do
  text=$(sed -n "${line}p" "$readme")
  [ "$figure" = "$main" ] && grep -qF "${stated[0]}" <<< "$text" && continue
  if ! grep -Eq "XCiT|xcit|CaiT|cait|UFO|ufo" <<< "$text"; then
    echo "FAIL: $readme:$line: $figure, a second figure for the main job? (move older ones to $training's history)"
    status=1
  fi
done < <(grep -no '\b\(8[0-9]\|9[0-9]\)\.[0-9][0-9]*%' "$readme")
[ "$status" -eq 0 ] && echo "PASS: one main-job figure, $main, as in $training"
exit "$status"
