#!/usr/bin/env bash
# Regenerates the peer-tool result fixtures of `goodput audit` (tests/fixtures/audit/) with the
# tools themselves, against `goodput sim` on 127.0.0.1:18000. Run by hand when a format
# changes; CI reads the committed files. Everything stays offline: the tokenizer is the test
# tokenizer.json, laid out as a Hugging Face cache entry (AIPerf accepts only hub ids) and as a
# plain directory (SGLang).
#
#   scripts/peer-fixtures.sh            # needs the debug binary: cargo build
#
# - AIPerf 0.13.0 (PyPI): `aiperf profile` → profile_export_aiperf.json, trimmed to the keys the
#   audit reads (the format's own keys, unchanged values), and its per-request
#   profile_export.jsonl beside it, each record trimmed to the fields `compare` reads.
# - SGLang: bench_serving.py from the sglang 0.4.6.post5 wheel, run as a script (newer releases
#   import the whole server, torch included); two runs appended to one JSONL, as its users do.
# - GuideLLM 0.6.1 (PyPI): `guidellm benchmark run --profile poisson` → guidellm-poisson.json, every
#   request kept, trimmed to the fields goodput reads.
# - inference-perf needs Python >= 3.12 (this machine has 3.11): its fixture was written by hand
#   from the report schema in inference_perf/reportgen/base.py (summarize_requests).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$HERE/tests/fixtures/audit"
BIN="${CARGO_TARGET_DIR:-$HOME/.cache/goodput/ci-target}/debug/goodput"
work="$(mktemp -d)"
trap 'kill "$sim" 2>/dev/null || true; rm -rf "$work"' EXIT
"$BIN" sim --port 18000 >"$work/sim.log" 2>&1 &
sim=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:18000/v1/models >/dev/null && break; sleep 0.2; done

# The tokenizer, as a directory and as a hub cache entry.
tok="$work/tok"; mkdir -p "$tok"
cp "$HERE/tests/fixtures/tokenizer.json" "$tok/"
echo '{"tokenizer_class":"PreTrainedTokenizerFast","model_max_length":8192}' >"$tok/tokenizer_config.json"
echo '{"model_type":"llama"}' >"$tok/config.json"
rev=0123456789abcdef0123456789abcdef01234567
hub="$work/hf/hub/models--goodput--sim-tokenizer"
mkdir -p "$hub/snapshots/$rev" "$hub/refs"; printf %s "$rev" >"$hub/refs/main"; cp "$tok"/* "$hub/snapshots/$rev/"

aiperf="$("$HERE/scripts/pyvenv.sh" aiperf aiperf==0.13.0)"
HF_HOME="$work/hf" HF_HUB_OFFLINE=1 "$aiperf/aiperf" profile --model goodput-sim-8b \
    --url http://127.0.0.1:18000 --endpoint-type chat --streaming --tokenizer goodput/sim-tokenizer \
    --request-rate 8 --request-count 40 --warmup-request-count 5 \
    --synthetic-input-tokens-mean 128 --output-tokens-mean 32 --extra-inputs ignore_eos:true \
    --artifact-dir "$work/aiperf" --ui-type none >/dev/null
python3 - "$work/aiperf/profile_export_aiperf.json" "$OUT/aiperf-profile-export.json" "$work/aiperf" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
keep = ['schema_version','aiperf_version','benchmark_id','request_throughput','request_latency',
        'request_count','time_to_first_token','time_to_first_output_token','inter_token_latency',
        'output_token_throughput','output_sequence_length','input_sequence_length',
        'usage_completion_tokens','benchmark_duration','request_error_rate',
        'completed_request_count','telemetry_data','input_config','run_info','was_cancelled',
        'is_complete','error_summary','start_time','end_time']
o = {k: d[k] for k in d if k in keep}
o['input_config']['artifacts']['dir'] = 'artifacts/goodput-sim'
o['run_info']['cli_command'] = o['run_info']['cli_command'].replace(sys.argv[3], 'artifacts/goodput-sim')
json.dump(o, open(sys.argv[2], 'w'), indent=2)
# The per-request export beside it, trimmed to what `goodput compare` reads of each record.
meta = ['benchmark_phase', 'request_start_ns', 'request_end_ns', 'was_cancelled']
metrics = ['time_to_first_token', 'request_latency', 'inter_token_latency',
           'output_sequence_length', 'input_sequence_length']
with open(sys.argv[3] + '/profile_export.jsonl') as f, \
        open(sys.argv[2].rsplit('/', 1)[0] + '/profile_export.jsonl', 'w') as out:
    for line in f:
        r = json.loads(line)
        t = {'metadata': {k: r['metadata'][k] for k in meta if k in r['metadata']},
             'metrics': {k: r['metrics'][k] for k in metrics if k in r['metrics']}}
        if r.get('error') is not None:
            t['error'] = r['error']
        out.write(json.dumps(t, separators=(',', ':')) + '\n')
PY

sgl="$("$HERE/scripts/pyvenv.sh" sglang-bench aiohttp numpy pandas requests tqdm transformers pillow)"
(cd "$work" && "$sgl/pip" download -q --no-deps sglang==0.4.6.post5 -d . \
    && python3 -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('sglang-*.whl')[0]); open('bench_serving.py','wb').write(z.read('sglang/bench_serving.py'))")
rm -f "$OUT/sglang-bench-serving.jsonl"
for args in "--request-rate 8 --max-concurrency 16" "--request-rate 16"; do
    # shellcheck disable=SC2086
    HF_HUB_OFFLINE=1 "$sgl/python" "$work/bench_serving.py" --backend sglang-oai \
        --base-url http://127.0.0.1:18000 --model goodput-sim-8b --tokenizer "$tok" \
        --dataset-name random-ids --random-input-len 128 --random-output-len 32 \
        --random-range-ratio 1.0 --num-prompts 40 $args \
        --output-file "$OUT/sglang-bench-serving.jsonl" --disable-tqdm >/dev/null
done
# GuideLLM 0.6.1: a Poisson benchmark whose report keeps every request (`requests.successful`),
# trimmed to the metrics and per-request fields the audit and `compare` read.
gl="$("$HERE/scripts/pyvenv.sh" guidellm guidellm==0.6.1)"
HF_HUB_OFFLINE=1 "$gl/guidellm" benchmark run --target http://127.0.0.1:18000 --model goodput-sim-8b \
    --profile poisson --rate 8 --max-requests 40 --data prompt_tokens=128,output_tokens=32 \
    --processor "$tok" --random-seed 42 --output-dir "$work/guidellm" --outputs benchmarks.json \
    --disable-console-interactive >/dev/null
python3 - "$work/guidellm/benchmarks.json" "$OUT/guidellm-poisson.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
per_request = ['request_start_time', 'request_end_time', 'request_latency', 'prompt_tokens',
               'output_tokens', 'time_to_first_token_ms', 'time_per_output_token_ms',
               'inter_token_latency_ms']
metrics = ['request_totals', 'requests_per_second', 'output_tokens_per_second',
           'request_latency', 'prompt_token_count', 'output_token_count',
           'time_to_first_token_ms', 'time_per_output_token_ms', 'inter_token_latency_ms']
out = {'metadata': d['metadata'], 'args': d['args'], 'benchmarks': []}
for b in d['benchmarks']:
    t = {k: b[k] for k in b if k not in ('metrics', 'requests', 'scheduler_metrics')}
    t['metrics'] = {k: b['metrics'][k] for k in metrics if k in b['metrics']}
    for m in t['metrics'].values():
        for part in (m.values() if isinstance(m, dict) else []):
            if isinstance(part, dict):
                part.pop('pdf', None)
    t['requests'] = {s: [{k: r[k] for k in per_request if k in r} for r in b['requests'].get(s) or []]
                     for s in ('successful', 'incomplete', 'errored')}
    t['requests']['total'] = b['requests'].get('total')
    out['benchmarks'].append(t)
out['args']['output_dir'] = 'artifacts/goodput-sim'
out['args']['processor'] = 'tokenizer'
json.dump(out, open(sys.argv[2], 'w'), indent=1)
PY
echo "fixtures written to $OUT"
