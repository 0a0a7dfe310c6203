#!/usr/bin/env bash
# bench/run.sh --from: a report written again from a run's results.json, and its "Against the best
# peer" section, on a made-up run whose medians are known: per workload the fastest peer and the
# instance's ratio to it (a peer that failed a workload does not count), the RSS ratios to glibc,
# the geomean against the peer with the least geomean, the workloads behind and how their rounds
# compare with the peer's; and a file that is not a results.json refused with a one-line error.
# Runs nothing.
# Prints `ok bench: report_from/<case>` or `not ok bench: report_from/<case>: <why>`. Env: SM_ROOT.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/bench/report_from.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks `bench/run.sh --from` on a made-up results.json: the report's "Against the best peer"
section (best peer per workload, ratios, geomeans, the workloads behind and how their rounds
compare), and the errors for a file that cannot be read or is not a results.json.
Prints `ok bench: report_from/<case>` or `not ok bench: report_from/<case>: <why>`.

Environment: SM_ROOT (repository root).
USAGE
            exit 0 ;;
        -*) echo "tests/bench/report_from.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok bench: report_from/setup: cannot cd to SM_ROOT"; exit 1; }
tmp=$(mktemp -d /tmp/sm-report-from.XXXXXX) || { echo "not ok bench: report_from/setup: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
bad=0
ok() { echo "ok bench: report_from/$1"; }
notok() { echo "not ok bench: report_from/$1: $2"; bad=1; }

# Three rounds; the medians: w1 glibc 1.0 s, fast 0.5, slow 0.9 (failed in round 2: not a candidate),
# sunmao 0.6 (1.20x fast); w2 glibc 2.0, fast 1.0, slow 0.4, sunmao 0.8 (2.00x slow, the best there);
# RSS (KiB) w1 glibc 1000 fast 1200 sunmao 1500 (1.50x glibc), w2 all 1000.
python3 - "$tmp/results.json" <<'PY' || { notok setup "python3 could not write the fixture"; exit 1; }
import json, sys
def runs(ts, rss, fail=None):
    return [{"round": i + 1, "ok": i != fail, "time": t, "rss_kib": rss, "reason": "" if i != fail else "exit 3: FAIL: x",
             "metrics": {}} for i, t in enumerate(ts)]
allocs = [{"name": "glibc", "preload": "", "kind": "baseline"}, {"name": "fast", "preload": "/x/fast.so", "kind": "peer"},
          {"name": "slow", "preload": "/x/slow.so", "kind": "peer"}, {"name": "sunmao", "preload": "/x/s.so", "kind": "sunmao"}]
ws = [{"name": n, "group": "stress", "full": [n], "quick": [n], "kind": "prog", "desc": n, "geo": ["time", "rss"]}
      for n in ("w1", "w2")]
r = {"w1/glibc": runs([1.0, 1.1, 0.9], 1000), "w1/fast": runs([0.5, 0.45, 0.6], 1200),
     "w1/slow": runs([0.3, 0.9, 0.95], 1100, fail=1), "w1/sunmao": runs([0.6, 0.7, 0.55], 1500),
     "w2/glibc": runs([2.0, 2.1, 1.9], 1000), "w2/fast": runs([1.0, 1.0, 1.0], 1000),
     "w2/slow": runs([0.4, 0.4, 0.4], 1000), "w2/sunmao": runs([0.8, 0.8, 0.8], 1000)}
m = {"cpu": "test", "cores": 2, "memory": "1 GiB", "os": "test", "kernel": "test", "gcc": "12", "git": "abc1234",
     "packages": {}}
json.dump({"machine": m, "config": {"quick": False, "rounds": 3, "baseline": "glibc", "timeout_s": 90,
                                    "allocators": allocs, "workloads": ws, "wall_s": 12.0}, "runs": r},
          open(sys.argv[1], "w"))
PY
out=$(bench/run.sh --from "$tmp/results.json" --results "$tmp/out" 2>&1)
rc=$?
md=$(ls "$tmp"/out/*.md 2>/dev/null | head -1)
if [ "$rc" -ne 0 ] || [ -z "$md" ]; then
    notok render "exit $rc, report: ${md:-none}: $(printf '%s' "$out" | tail -1)"
    exit 1
fi
ok render
# The fastest peer overall, over the workloads every peer completed (w2; slow failed w1): slow.
check() { # case, fixed string expected in the report
    if grep -qF -- "$2" "$md"; then ok "$1"; else notok "$1" "no '$2' in the report"; fi
}
check section "## Against the best peer"
check w1_row "| w1 | fast 0.500 | glibc 1.0"
check w1_cells "**1.20x**, **1.50x**, 1.50x |"
check w2_row "| w2 | slow 0.400 | glibc 1.0"
check w2_cells "**2.00x**, 1.00x, 1.00x |"
check fastest "fastest: **slow**; leanest: **glibc**"
check geomean "time 2.000 (1 workloads) the fastest peer's"
check behind "behind on w2 2.00x (slow), w1 1.20x (fast)"
check heavy "Above 1.3x glibc's RSS: w1 1.50x."
check why_every_round "- w2, 2.00x slow: behind on every round (0.800–0.800 s against 0.400–0.400)"
check why_overlap "- w1, 1.20x fast: rounds overlap (0.550–0.700 s against 0.450–0.600)"
check why_rss "- w1, RSS 1.50x glibc's: no measured reason yet"
check machine "| sunmao commit | abc1234 |"
check median "| 0.600 [0.550–0.700] ×0.60 |"
# Bad input: a file that is not there, one that is not a results.json.
out=$(bench/run.sh --from "$tmp/none.json" 2>&1); rc=$?
if [ "$rc" = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && printf '%s' "$out" | grep -q "cannot read"; then
    ok missing_file
else
    notok missing_file "exit $rc: $out"
fi
echo '{"config": {}}' > "$tmp/bad.json"
out=$(bench/run.sh --from "$tmp/bad.json" --results "$tmp/out2" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && printf '%s' "$out" | grep -q "not a results.json"; then
    ok not_results_json
else
    notok not_results_json "exit $rc: $out"
fi
exit "$bad"
