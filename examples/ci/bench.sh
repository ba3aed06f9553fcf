#!/usr/bin/env bash
# One benchmark as a CI gate: runs CONTRACT against the engine at $GOODPUT_URL and fails the
# job, with goodput's own exit status, when the result is INVALID (4), misses its SLO (5),
# meets it on too few requests to support the pass (8) or misses a prediction (6); with
# $GOODPUT_BASELINE (a bundle from the main branch, say), also when the outputs changed (7). The bundle stays under $GOODPUT_OUT (default runs/) for the job to
# upload whatever happened.
#
#   GOODPUT_URL=http://127.0.0.1:8000 examples/ci/bench.sh examples/ci/contract.toml
#
# Extra arguments go to `goodput run` (e.g. --predict "ttft_p99<=400ms", --set slo.ttft_ms=300).
set -uo pipefail
contract="${1:?usage: bench.sh CONTRACT [goodput run arguments…]}"
shift
: "${GOODPUT_URL:?set GOODPUT_URL to the base URL of the engine}"
gates=invalid,slo
extra=()
for a in "$@"; do [[ "$a" == --predict* ]] && gates+=,prediction; done
if [[ -n "${GOODPUT_BASELINE:-}" ]]; then
    gates+=,quality
    extra+=(--baseline "$GOODPUT_BASELINE")
fi
goodput run "$contract" --url "$GOODPUT_URL" --out "${GOODPUT_OUT:-runs}" --quiet \
    --fail-on "$gates" "${extra[@]}" "$@"
status=$?
case $status in
    0) echo "goodput: passed ($gates)" ;;
    3) echo "goodput: the run gave up: the engine failed every request or stopped answering" ;;
    4) echo "goodput: INVALID: the measurement cannot support its claims (see Validity above)" ;;
    5) echo "goodput: the SLO is not met" ;;
    8) echo "goodput: the SLO is met, but on too few requests to support it (raise load.requests)" ;;
    6) echo "goodput: a prediction did not hold" ;;
    7) echo "goodput: the outputs are not the baseline's: quality was not held" ;;
    *) echo "goodput: failed (exit $status)" ;;
esac
exit $status
