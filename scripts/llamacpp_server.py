"""Starts llama.cpp's own HTTP server (embedded in the xllamacpp wheel) on loopback and keeps it
running until SIGTERM/SIGINT. Called by scripts/real-engine.sh; not imported by anything else.

Usage: llamacpp_server.py --model PATH --port N [--parallel 4] [--ctx 4096] [--threads 1] [--swa-full]
                          [--draft PATH [--draft-max 8]] [--chat-template FILE]
"""

import argparse
import signal
import sys
import threading

import xllamacpp


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--alias", default="gemma-3-270m")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096, help="context shared by all slots")
    ap.add_argument("--threads", type=int, default=1)
    # Gemma 3 attends over a sliding window: without a full-size window cache, llama.cpp
    # cannot cut a slot's cache back to a shared prefix and reuses none of it (cache_n 1).
    ap.add_argument("--swa-full", action="store_true")
    # Speculative decoding with a draft model (the model itself is allowed: every draft is
    # then the target's own greedy choice, and acceptance should be near 1).
    ap.add_argument("--draft")
    ap.add_argument("--draft-max", type=int, default=8)
    # A Jinja chat template of its own (tool calls: scripts/tools-template.jinja).
    ap.add_argument("--chat-template")
    a = ap.parse_args()

    p = xllamacpp.CommonParams()
    p.model.path = a.model
    p.model_alias = {a.alias}
    p.hostnames = ["127.0.0.1"]
    p.port = a.port
    p.n_ctx = a.ctx
    p.n_parallel = a.parallel
    p.cont_batching = True
    p.endpoint_metrics = True
    p.endpoint_props = True
    p.endpoint_slots = True
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.n_threads_http = 4
    p.swa_full = a.swa_full
    p.use_jinja = True
    if a.chat_template:
        with open(a.chat_template, encoding="utf-8") as f:
            p.chat_template = f.read()
    if a.draft:
        s = p.speculative
        s.draft.mparams.path = a.draft
        s.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
        s.draft.n_max = a.draft_max
        s.draft.n_min = 0
        p.speculative = s

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(p)
    print(f"llama.cpp server (xllamacpp) on {server.listening_address}", flush=True)
    stop.wait()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
