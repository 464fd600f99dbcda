#!/usr/bin/env bash
# Sleeper accounts against the new trust rule and the rule before it (docs/guides/rigging.md,
# "Sleepers"): per lane, one `stablearena experiment rigging` run per (rule, target, family,
# attacker age, warm-up), 10 seeds each, per-seed JSON under $OUT/<cell>/ (a stopped run resumes).
#   bash bench/run_sleepers.sh LANE [OUT]
#   LANE: new | old | honest | families | topbottom | priority | record | default | default2 |
#         extra | default3 | precise | share | young | young2 | young3 | young4 | ramp
#   (new, priority, honest, families, topbottom: record 30 days, the first candidate)
set -u
lane=$1
out=${2:-runs/sleepers}
common=(--seeds 10 --fraction 0.01 --precision 1.5 --defences m-elo,am-elo+screen+influence+bounded)
new=(--trust-days active --record-days 30)   # the first candidate: active days, record 30 days
default=(--trust-days active --record-days 365)  # the new default: record 365 active days
old=(--trust-days age --record-days 0)       # the rule before: days since creation, no record rule
cell() {  # name, then rigging options
  local name=$1; shift
  nice -n 10 stablearena experiment rigging "${common[@]}" "$@" --results "$out/$name" \
    --format json --output "$out/$name.json" >/dev/null 2>>"$out/errors.log" \
    && echo "$(date -u +%H:%M:%S) done $name" || echo "$(date -u +%H:%M:%S) FAILED $name"
}
mkdir -p "$out"
case $lane in
  new|old)
    rule=("${new[@]}"); [ "$lane" = old ] && rule=("${old[@]}")
    for fam in target+camo/many omni+camo/many; do
      for age in 8 30; do
        for w in 0 50 100; do
          cell "$lane-middle-${fam//[\/+]/_}-age$age-w$w" "${rule[@]}" --targets middle \
            --families "$fam" --attack-age "$age" --warmup "$w"
        done
      done
    done ;;
  priority)  # what the guide's tables were measured with, beyond the middle target+camo/many
    for w in 50 0; do  # the new rule keeping small accounts (δ 10) and without the vote ramp
      cell "new-d10-noramp-middle-target_camo_many-age8-w$w" "${new[@]}" --min-records 10 \
        --ramp-votes 0 --targets middle --families target+camo/many --attack-age 8 --warmup "$w"
    done
    cell "new-middle-omni_camo_many-age8-w0" "${new[@]}" --targets middle \
      --families omni+camo/many --attack-age 8 --warmup 0
    cell "new-top-target_camo_many-age8-w0" "${new[@]}" --targets top \
      --families target+camo/many --attack-age 8 --warmup 0
    cell "new-middle-omni_camo_many-age8-w100" "${new[@]}" --targets middle \
      --families omni+camo/many --attack-age 8 --warmup 100
    cell "new-bottom-target_camo_many-age8-w0" "${new[@]}" --targets bottom \
      --families target+camo/many --attack-age 8 --warmup 0 ;;
  default)  # the new default (record 365 days) at the middle target
    for w in 0 50 100; do
      cell "new-rec365-middle-target_camo_many-age8-w$w" "${default[@]}" --targets middle \
        --families target+camo/many --attack-age 8 --warmup "$w"
    done ;;
  default2)  # the new default: top and bottom, then every family of the last round at age 0
    for t in top bottom; do
      cell "new-rec365-$t-target_camo_many-age30-w100" "${default[@]}" --targets "$t" \
        --families target+camo/many --attack-age 30 --warmup 100
    done
    cell "new-rec365-middle-all-age0-w0" "${default[@]}" --targets middle --attack-age 0 ;;
  extra)  # the default at the top and bottom at age 8; δ 10 without vote ramp at record 365
    for t in top bottom; do
      cell "new-rec365-$t-target_camo_many-age8-w0" "${default[@]}" --targets "$t" \
        --families target+camo/many --attack-age 8 --warmup 0
    done
    for w in 0 100; do
      cell "new-rec365-d10-noramp-middle-target_camo_many-age8-w$w" "${default[@]}" \
        --min-records 10 --ramp-votes 0 --targets middle --families target+camo/many \
        --attack-age 8 --warmup "$w"
    done ;;
  default3)  # the default at the top and bottom with 50 board-agreeing warm-up votes
    for t in top bottom; do
      cell "new-rec365-$t-target_camo_many-age8-w50" "${default[@]}" --targets "$t" \
        --families target+camo/many --attack-age 8 --warmup 50
    done ;;
  share)  # the young-share cap alone (before young accounts left the ability fit: run on the
    # commit that added --young-share), every family at the middle, accounts made for the attack
    for ys in 0.2 0.1; do
      cell "new-rec365-ys$ys-middle-all-age0-w0" "${default[@]}" --young-share "$ys" \
        --targets middle --attack-age 0
    done ;;
  young)  # the default with young accounts out of the ability fit (and the share cap 0.2):
    # every family at the middle, accounts made for the attack; then bisected to 1.2
    cell "new-yo-middle-all-age0-w0" "${default[@]}" --targets middle --attack-age 0
    for fam in target+camo/few target+camo/many; do
      cell "new-yo-middle-${fam//[\/+]/_}-age0-w0-p1.2" "${default[@]}" --precision 1.2 \
        --targets middle --families "$fam" --attack-age 0
    done ;;
  young2)  # the same: idle sleepers at the top, middle, bottom; a warmed-up one (not young)
    for t in top middle bottom; do
      cell "new-yo-$t-target_camo_many-age8-w0" "${default[@]}" --targets "$t" \
        --families target+camo/many --attack-age 8 --warmup 0
    done
    cell "new-yo-middle-target_camo_many-age8-w50" "${default[@]}" --targets middle \
      --families target+camo/many --attack-age 8 --warmup 50 ;;
  young4)  # the default: warmed-up sleepers (not young: past 7 active days) at the middle,
    # top and bottom
    for aw in "8 100" "30 50" "30 100"; do
      set -- $aw
      cell "new-yo-middle-target_camo_many-age$1-w$2" "${default[@]}" --targets middle \
        --families target+camo/many --attack-age "$1" --warmup "$2"
    done
    for t in top bottom; do
      cell "new-yo-$t-target_camo_many-age8-w50" "${default[@]}" --targets "$t" \
        --families target+camo/many --attack-age 8 --warmup 50
    done ;;
  ramp)  # the default with a longer day ramp (10, 14 days) on the camouflaged families
    for d in 10 14; do
      cell "new-yo-ramp$d-middle-camo-age0-w0" "${default[@]}" --ramp-days "$d" \
        --targets middle --families target+camo/few,target+camo/many --attack-age 0
    done ;;
  young3)  # a young share of 0.1; the idle sleeper at the top and bottom with 12,500 votes
    cell "new-yo-ys0.1-middle-all-age0-w0" "${default[@]}" --young-share 0.1 \
      --targets middle --attack-age 0
    for t in top bottom; do
      cell "new-yo-$t-target_camo_many-age8-w0-b12500" "${default[@]}" --max-votes 12500 \
        --targets "$t" --families target+camo/many --attack-age 8 --warmup 0
    done ;;
  precise)  # the default's idle sleeper at the middle, costs bisected to 1.2 instead of 1.5
    cell "new-rec365-middle-target_camo_many-age8-w0-p1.2" "${default[@]}" --precision 1.2 \
      --targets middle --families target+camo/many --attack-age 8 --warmup 0
    cell "new-rec365-middle-target_camo_few-age0-w0-p1.2" "${default[@]}" --precision 1.2 \
      --targets middle --families target+camo/few --attack-age 0 --warmup 0 ;;
  record)  # 30-day sleepers that warm up reach a 30-day record: a record no sleeper reaches
    for w in 50 100; do
      cell "new-rec365-middle-target_camo_many-age30-w$w" "${new[@]}" --record-days 365 \
        --targets middle --families target+camo/many --attack-age 30 --warmup "$w"
    done
    cell "new-rec365-d10-noramp-middle-target_camo_many-age30-w50" "${new[@]}" --record-days 365 \
      --min-records 10 --ramp-votes 0 --targets middle --families target+camo/many \
      --attack-age 30 --warmup 50 ;;
  honest)  # warm-up drawn like an honest annotator's
    for age in 8 30; do
      for w in 50 100; do
        cell "new-middle-target_camo_many-age$age-w$w-honest" "${new[@]}" --targets middle \
          --families target+camo/many --attack-age "$age" --warmup "$w" --warmup-mode honest
      done
    done ;;
  families)  # every family of the last round, accounts created for the attack
    cell "new-middle-all-age0-w0" "${new[@]}" --targets middle --attack-age 0 ;;
  topbottom)
    for t in top bottom; do
      for age in 8 30; do
        for w in 0 100; do
          cell "new-$t-target_camo_many-age$age-w$w" "${new[@]}" --targets "$t" \
            --families target+camo/many --attack-age "$age" --warmup "$w"
        done
      done
    done ;;
esac
