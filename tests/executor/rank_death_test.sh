#!/usr/bin/env bash
# A killed or stalled rank must end the job within 60 s with an error that names the cause.
# Usage: rank_death_test.sh MPIRUN BINARY kill|stall|startup
set -u
mpirun=$1
bin=$2
mode=${3:-kill}
start=$(date +%s)
if [[ $mode == stall || $mode == startup ]]; then
  out=$(DITUNE_COMM_TIMEOUT_S=3 timeout 90 "$mpirun" -np 2 --oversubscribe --allow-run-as-root "$bin" "$mode" 2>&1)
else
  out=$(timeout 90 "$mpirun" -np 2 --oversubscribe --allow-run-as-root "$bin" kill 2>&1)
fi
rc=$?
elapsed=$(($(date +%s) - start))
echo "$out" | grep -v '^$' | head -8
echo "exit $rc after ${elapsed}s"
if [[ $rc -eq 124 ]]; then echo "FAIL: the job hung"; exit 1; fi
if [[ $rc -eq 0 ]]; then echo "FAIL: the job reported success with a $mode rank"; exit 1; fi
if [[ $elapsed -gt 60 ]]; then echo "FAIL: took ${elapsed}s to stop"; exit 1; fi
if [[ $mode == startup ]]; then
  if ! grep -Eq "rank 0: MPI start-up \(MPI_Init\) did not complete within 3 s" <<<"$out"; then
    echo "FAIL: the error does not name the rank, the start-up step and the limit"; exit 1
  fi
  if [[ $elapsed -lt 3 ]]; then echo "FAIL: stopped before the timeout (${elapsed}s)"; exit 1; fi
elif [[ $mode == stall ]]; then
  if ! grep -Eq "MPI [a-z -]+ did not complete within 3 s" <<<"$out"; then
    echo "FAIL: the error does not name the transfer and the limit"; exit 1
  fi
  if [[ $elapsed -lt 3 ]]; then echo "FAIL: stopped before the timeout (${elapsed}s)"; exit 1; fi
elif ! grep -Eq "rank 1|process rank 1" <<<"$out"; then
  echo "FAIL: the error does not name rank 1"; exit 1
fi
echo "1 passed, 0 failed"
