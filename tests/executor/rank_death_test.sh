#!/usr/bin/env bash
# A killed rank must end the job within 60 s with an error that names it.
set -u
mpirun=$1
bin=$2
start=$(date +%s)
out=$(timeout 90 "$mpirun" -np 2 --oversubscribe --allow-run-as-root "$bin" 2>&1)
rc=$?
elapsed=$(($(date +%s) - start))
echo "$out" | tail -5
echo "exit $rc after ${elapsed}s"
if [[ $rc -eq 124 ]]; then echo "FAIL: the job hung"; exit 1; fi
if [[ $rc -eq 0 ]]; then echo "FAIL: the job reported success with a dead rank"; exit 1; fi
if [[ $elapsed -gt 60 ]]; then echo "FAIL: took ${elapsed}s to stop"; exit 1; fi
if ! grep -Eq "rank 1|process rank 1" <<<"$out"; then echo "FAIL: the error does not name rank 1"; exit 1; fi
echo "1 passed, 0 failed"
