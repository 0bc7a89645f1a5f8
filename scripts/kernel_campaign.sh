#!/usr/bin/env bash
# The kernel runs behind README's decision table, in order, each resumed from its ledger.
#
#   sudo scripts/kernel_campaign.sh [--code COMMIT|DIR] [--allow-drift]   # run the steps left
#   scripts/kernel_campaign.sh --list [--code COMMIT|DIR]                  # where each step stands
#
# Where things are: a finished run in this checkout's reports/leaderboard/<run>; a run in
# progress in campaign/<run>, committed before a session ends, because each session here starts
# on a fresh machine (campaign/README.md). A new run starts in campaign/ and, once complete, moves
# to reports/leaderboard/<run>, replacing a run it redoes; it is then laid out by hand
# (docs/leaderboard.md). Which code runs the trials: --code COMMIT (a worktree of it is made once,
# /tmp/scidmz-kernel-COMMIT) or --code DIR (a checkout); default this checkout. A run resumes only
# on the code and kernel build its ledger recorded; --allow-drift resumes across a change of
# either, recorded in the ledger and the results (docs/leaderboard.md, "The ledger and --resume").
#
# A quiet machine only: nothing else running (no tests, no builds); every unit records the
# machine's signals and a disturbed trial is re-run (docs/leaderboard.md, "Validity"). Ctrl-C
# stops the current step with its finished trials kept, and the next invocation goes on.
# Ours: MRAE and FCT first (the decision table), then the campus short-flow trials the trade-off
# figures need (10 per policy: a fixed-target trial, as FCT), then the kernel floors: the DTN paced
# alone on the regime's MRAE plan (docs/leaderboard.md, "The floor"). A floor needs code with the
# probe host (plant/netns/spec.py, PROBE_OCTET): before it, a floor's probe came from the DTN and
# judged every trial invalid, so such code stops there with one line. Every run after the kernel
# CUBIC one judges a unit's delay-stage lateness by 0.3 ms, not 0.5 ms, and its CPU pressure by
# 0.6, not 0.30 (campaign/README.md says why; fixed before the kernel BBR v1 run's first counted trial).
set -euo pipefail
cd "$(dirname "$0")/.."
LB=reports/leaderboard
CAMP=campaign
TIGHT="--set plan.max_stage_late=0.3ms --set plan.max_cpu_pressure=0.6"
STEPS=(
  # ~7 h: 8 policies x (20 MRAE x 124 s + 10 FCT x ~75 s)
  "netns-testbed-cubic|--trials 20 --fct-trials 10"
  "netns-testbed-bbr|--set dtn.cca=bbr $TIGHT --trials 20 --fct-trials 10"
  # ~2.8 h each: campus short flows beside every policy
  "netns-testbed-cubic-short|$TIGHT --experiments short --trials 10"
  "netns-testbed-bbr-short|--set dtn.cca=bbr $TIGHT --experiments short --trials 10"
  # ~45 min each: pacing alone, 20 MRAE trials, no campus traffic
  "netns-testbed-cubic-floor|--policies pacing --experiments mrae --trials 20 --set campus.hosts=0 $TIGHT"
  "netns-testbed-bbr-floor|--policies pacing --experiments mrae --trials 20 --set campus.hosts=0 --set dtn.cca=bbr $TIGHT"
)

die() { echo "kernel_campaign: $*" >&2; exit 2; }

list=0 drift=() code=.
while [ $# -gt 0 ]; do
  case $1 in
    --list) list=1 ;;
    --allow-drift) drift=(--allow-drift) ;;
    --code) [ $# -ge 2 ] || die "--code needs a commit or a checkout"; code=$2; shift ;;
    *) die "unknown option $1 (--list, --code COMMIT|DIR, --allow-drift)" ;;
  esac
  shift
done

if [ $list = 0 ] && [ ! -d "$code/src/scidmz" ]; then
  commit=$(git rev-parse --verify --quiet "$code^{commit}" 2>/dev/null) || die "--code $code is neither a checkout nor a commit"
  wt=/tmp/scidmz-kernel-${commit:0:12}
  [ -d "$wt/src/scidmz" ] || git worktree add --detach --quiet "$wt" "$commit" || die "cannot make a worktree of $code at $wt"
  code=$wt
fi
# the trials run this code, whatever is installed: a run resumes only on the code its ledger recorded
PYTHONPATH="$(cd "$code" && pwd)/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH

complete() {  # $1: a results.json; true when it is a finished run made under a validity rule
  [ -f "$1" ] && python3 - "$1" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
sys.exit(0 if "validity" in (doc.get("plan") or {}) and doc.get("complete", True) else 1)
EOF
}

state() {  # done | resume | new
  if complete "$LB/$1/results.json"; then
    echo done
  elif [ -s "$CAMP/$1/ledger.jsonl" ]; then
    echo resume
  else
    echo new
  fi
}

for step in "${STEPS[@]}"; do
  name=${step%%|*}
  args=${step#*|}
  st=$(state "$name")
  if [ $list = 1 ]; then
    where=$CAMP/$name
    [ "$st" = done ] && where=$LB/$name
    echo "$st  scidmz leaderboard testbed --plant netns $args --out $where"
    continue
  fi
  [ "$st" = done ] && continue
  if [[ "$args" == *campus.hosts=0* ]] && ! python3 -c "from scidmz.plant.netns.spec import PROBE_OCTET" 2>/dev/null; then
    die "$CAMP/$name needs the probe host, which the code in $code predates; run the floors with newer code (--code)"
  fi
  resume=()
  [ "$st" = resume ] && resume=(--resume "${drift[@]}")
  mkdir -p "$CAMP"
  # shellcheck disable=SC2086  # $args is a list of options
  python3 -m scidmz.cli leaderboard testbed --plant netns $args --out "$CAMP/$name" "${resume[@]}"
  complete "$CAMP/$name/results.json" || die "$CAMP/$name ended unfinished; run this again to resume it"
  rm -rf "${LB:?}/$name"
  mv "$CAMP/$name" "$LB/$name"
  echo "kernel_campaign: $name is complete, now in $LB/$name; lay it out as docs/leaderboard.md says" >&2
done
