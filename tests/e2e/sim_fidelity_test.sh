#!/usr/bin/env bash
# End-to-end: `goldminer simulate` held against a real run (#46's fidelity check).
# bench/pool_bench.sh submits its three jobs to the suite's Slurm cluster with a
# fixed CPU split and then through `goldminer pool`, profiles each job with
# `goldminer profile`, and replays them with `goldminer simulate --profiles` (the
# fixed split as static, the pool as cluster); every job's predicted completion
# time must be within the tolerance of the measured one.
#
# The tolerance: bench/pool_bench.sh on an idle machine is within 15% (2% at full
# size, 3% at this one: bench/README.md). Here the jobs are half that size (X
# 3,600 samples, Y and Z 600: about 30 to 65 s each) and run beside other suites
# under ctest -j2, where start-ups take seconds longer and the pooled X's
# autoscaler, judging its gains on a noisy machine, decides later: one such run
# measured the pooled X 19% slower than predicted (the fixed split within 2%). So
# the suite allows 35%, which still catches a model that is wrong by its shape
# (the replay's first faults were 23% and 90%).
source "$(dirname "$0")/lib.sh"
TOLERANCE=0.35
bash "$SRC/bench/pool_bench.sh" --build "$BUILD" --repeat 1 --samples-x 3600 --samples-yz 600 \
  --epoch 600 --tolerance "$TOLERANCE" >"$T/bench.out" 2>"$T/bench.err"
rc=$?
cat "$T/bench.out"
((rc == 0)) || { cat "$T/bench.err" >&2; fail "pool_bench --simulate --tolerance $TOLERANCE: exit $rc"; }
ok "the jobs ran, fixed and through the pool, and were replayed from their profiles"
for mode in fixed pool; do
  for job in X Y Z; do
    grep -qE "^  $mode +$job +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$T/bench.out" ||
      fail "no predicted and measured time for job $job ($mode)"
  done
done
ok "every job's predicted completion time is beside its measured one, both policies"
expect_in "$T/bench.out" "simulate: the largest miss is" "the largest miss is said"
ok "every prediction within $TOLERANCE of the measured time"
done_suite
