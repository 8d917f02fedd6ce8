# Stage bookkeeping for .ci/run (sourced): `stage NAME BUDGET_SECONDS COMMAND...` runs COMMAND,
# prints its time, warns when it ran over its budget, and records it for the summary table that is
# printed when the script exits, whether it passed or failed. Budgets are seconds on the slowest
# machine CI runs on, whose whole run must stay within 45 minutes (ci_target);
# TESSERA_CI_BUDGET_SCALE (default 1) scales them all, e.g. 0.45 to hold a fast machine to its share.
ci_start=$(date +%s)
ci_names=() ci_seconds=() ci_budgets=() ci_states=()
ci_scale=${TESSERA_CI_BUDGET_SCALE:-1}
ci_target=$(awk -v s="$ci_scale" 'BEGIN { printf "%d", 2700 * s + 0.5 }')

stage() {
  local name=$1 budget=$2
  shift 2
  budget=$(awk -v b="$budget" -v s="$ci_scale" 'BEGIN { printf "%d", b * s + 0.5 }')
  echo "ci: stage '$name' (budget $budget s) starts at $(( $(date +%s) - ci_start )) s"
  local begin rc=0
  begin=$(date +%s)
  "$@" || rc=$?
  local took=$(( $(date +%s) - begin ))
  ci_names+=("$name") ci_seconds+=("$took") ci_budgets+=("$budget")
  if [ "$rc" -ne 0 ]; then
    ci_states+=("FAILED (exit $rc)")
    echo "ci: stage '$name' FAILED with exit code $rc after $took s"
    exit "$rc"
  fi
  if [ "$took" -gt "$budget" ]; then
    ci_states+=("over budget")
    echo "ci: WARNING: stage '$name' took $took s, over its budget of $budget s (docs/ci.md)"
  else
    ci_states+=("ok")
  fi
  echo "ci: $name done at $(( $(date +%s) - ci_start )) s ($took s)"
}

ci_summary() {
  local rc=$? i cumulative=0 budgets=0
  echo
  echo "ci: summary ($(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
  printf 'ci: | %-45s | %7s | %10s | %6s | %s\n' stage seconds cumulative budget state
  for i in "${!ci_names[@]}"; do
    cumulative=$(( cumulative + ci_seconds[i] ))
    budgets=$(( budgets + ci_budgets[i] ))
    printf 'ci: | %-45s | %7d | %10d | %6d | %s\n' "${ci_names[i]}" "${ci_seconds[i]}" "$cumulative" \
      "${ci_budgets[i]}" "${ci_states[i]}"
  done
  local total=$(( $(date +%s) - ci_start ))
  printf 'ci: | %-45s | %7d | %10s | %6d |\n' total "$total" "" "$budgets"
  if [ "$total" -gt "$ci_target" ]; then
    echo "ci: WARNING: the run took $total s, over the target of $ci_target s (docs/ci.md)"
  else
    echo "ci: the run took $total s of the $ci_target s target"
  fi
  return "$rc"
}
trap ci_summary EXIT
