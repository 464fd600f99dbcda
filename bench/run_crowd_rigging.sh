#!/usr/bin/env bash
# The crowd rule (docs/methods/crowd.md) against every rigging family, sleepers and drip
# accounts, on each crowd model (docs/guides/rigging.md, "The crowd rule"): one
# `stablearena experiment rigging` run per (crowd, lane), paired with m-ELO on the same seeds,
# per-seed JSON under $OUT/<cell>/ (a stopped run resumes).
#   bash bench/run_crowd_rigging.sh LANE [OUT] [SEEDS]
#   LANE: bare | sleep50 | sleep100 | drip | all
#     bare      every family of stablearena.simulation.attacks.FAMILIES, accounts made the day they attack
#     sleep50   sleepers: accounts 30 days old with 50 warm-up votes that agree with the board
#     sleep100  the same with 100 warm-up votes
#     drip      accounts that vote 4 honest-looking votes a day for 15 days, then their target
#               votes over 15 more days (camouflaged: mixed with honest-looking votes)
set -u
lane=$1
out=${2:-runs/crowd_rigging}
seeds=${3:-10}
common=(--seeds "$seeds" --fraction 0.01 --precision 1.5 --defences m-elo,crowd
        --targets top,middle,bottom)
cell() {  # name, then rigging options
  local name=$1; shift
  nice -n 10 stablearena experiment rigging "${common[@]}" "$@" --results "$out/$name" \
    --format json --output "$out/$name.json" >/dev/null 2>>"$out/errors.log" \
    && echo "$(date -u +%H:%M:%S) done $name" || echo "$(date -u +%H:%M:%S) FAILED $name"
}
mkdir -p "$out"
run_lane() {
  local crowd=$1 l=$2
  case $l in
    bare) cell "$crowd-bare" --crowd "$crowd" ;;
    sleep50|sleep100)
      cell "$crowd-$l" --crowd "$crowd" --families target+camo/many,omni+camo/many \
        --attack-age 30 --warmup "${l#sleep}" ;;
    drip)
      cell "$crowd-drip" --crowd "$crowd" --families target+camo/many,omni+camo/many \
        --attack-age 15 --warmup 60 --warmup-mode honest --attack-days 15 ;;
    *) echo "unknown lane $l" >&2; exit 2 ;;
  esac
}
for crowd in casual public regulars; do
  if [ "$lane" = all ]; then
    for l in bare sleep50 sleep100 drip; do run_lane "$crowd" "$l"; done
  else
    run_lane "$crowd" "$lane"
  fi
done
