#!/usr/bin/env bash
# The kernel runs behind README's decision table, in order, each resumed from its ledger.
#
#   sudo scripts/kernel_campaign.sh            # from the checkout the runs are to use
#   sudo scripts/kernel_campaign.sh --list     # what each step runs, and whether it is done
#
# A quiet machine only: nothing else running (no tests, no builds); every unit records the
# machine's signals and a disturbed trial is re-run (docs/leaderboard.md, "Validity"). A step
# whose results.json says it is complete is skipped; one with a ledger is resumed; Ctrl-C
# stops the current step with its finished trials kept, and the next invocation goes on.
# About 21.5 h in all on this project's 2-core machine (each line's estimate below).
# Ours: MRAE and FCT first (the decision table), then the campus short-flow trials the trade-off
# figures need (10 per policy: a fixed-target trial, as FCT), then the kernel floors: the DTN paced
# alone on the regime's MRAE plan (docs/leaderboard.md, "The floor"). A floor needs a checkout with
# the probe host (plant/netns/spec.py, PROBE_OCTET): before it, a floor's probe came from the DTN and
# judged every trial invalid, so such a checkout stops there with one line.
set -euo pipefail
cd "$(dirname "$0")/.."
# this checkout's code, whatever is installed: a run resumes only on the code its ledger recorded
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
LB=reports/leaderboard
STEPS=(
  # ~7 h: 8 policies x (20 MRAE x 124 s + 10 FCT x ~75 s)
  "$LB/netns-testbed-cubic|--trials 20 --fct-trials 10"
  "$LB/netns-testbed-bbr|--set dtn.cca=bbr --trials 20 --fct-trials 10"
  # ~2.8 h each: campus short flows beside every policy
  "$LB/netns-testbed-cubic-short|--experiments short --trials 10"
  "$LB/netns-testbed-bbr-short|--set dtn.cca=bbr --experiments short --trials 10"
  # ~45 min each: pacing alone, 20 MRAE trials, no campus traffic
  "$LB/netns-testbed-cubic-floor|--policies pacing --experiments mrae --trials 20 --set campus.hosts=0"
  "$LB/netns-testbed-bbr-floor|--policies pacing --experiments mrae --trials 20 --set campus.hosts=0 --set dtn.cca=bbr"
)

state() {  # done | legacy | resume | new
  local out=$1
  if [ -f "$out/results.json" ]; then
    python3 - "$out/results.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
if "validity" not in (doc.get("plan") or {}):
    print("legacy")  # run before the plan carried its validity rule: to be replaced, not resumed
elif doc.get("complete", True):
    print("done")
else:
    print("resume")
EOF
  elif [ -s "$out/ledger.jsonl" ]; then
    echo resume
  else
    echo new
  fi
}

for step in "${STEPS[@]}"; do
  out=${step%%|*}
  args=${step#*|}
  st=$(state "$out")
  if [ "${1:-}" = "--list" ]; then
    echo "$st  scidmz leaderboard testbed --plant netns $args --out $out"
    continue
  fi
  [ "$st" = done ] && continue
  if [ "$st" = legacy ]; then
    echo "kernel_campaign: $out holds a run made before the validity rule; move it away (git rm -r) first" >&2
    exit 2
  fi
  if [[ "$args" == *campus.hosts=0* ]] && ! python3 -c "from scidmz.plant.netns.spec import PROBE_OCTET" 2>/dev/null; then
    echo "kernel_campaign: $out needs the probe host, which this checkout's code predates; run the floors from a newer checkout" >&2
    exit 2
  fi
  resume=()
  [ "$st" = resume ] && resume=(--resume)
  # shellcheck disable=SC2086  # $args is a list of options
  scidmz leaderboard testbed --plant netns $args --out "$out" "${resume[@]}"
done
