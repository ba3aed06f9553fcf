"""Turns the Gemma 3 270M GGUF file the llama.cpp engine serves into a Hugging Face directory
vLLM can load: dequantized to bfloat16, with the fixes the conversion leaves out. Called by
scripts/vllm.sh install; not imported by anything else.

Usage: vllm_model.py GGUF_FILE OUT_DIR

The fixes (each checked against the model's own behaviour on this machine):
- the converted tokenizer.json does not add <bos>, though the GGUF says it should; without it
  the model emits junk, so a post-processor adds it (and add_bos_token says so);
- generation stops at <eos> (1) and <end_of_turn> (106);
- the base model has no chat template: a standard Gemma turn template, a system message folded
  into the first user turn.
"""

import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

CHAT_TEMPLATE = (
    "{{ bos_token }}{% set first = namespace(system='') %}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set first.system = message['content'] ~ '\\n\\n' %}"
    "{% else %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ first.system if role == 'user' else '' }}"
    "{{ message['content'] | trim }}<end_of_turn>\n"
    "{% if role == 'user' %}{% set first.system = '' %}{% endif %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def edit_json(path, change):
    with open(path) as f:
        doc = json.load(f)
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)


def main() -> int:
    gguf, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.split(gguf)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True),
    )
    # Dequantized: the GGUF quantization no longer describes the weights written.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(out)
    tok.save_pretrained(out)

    def bos(t):
        bos_ids = {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}
        first = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
        t["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [first, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                first,
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": bos_ids,
        }

    def config(c):
        c["add_bos_token"] = True
        c["chat_template"] = CHAT_TEMPLATE

    def stops(g):
        g["eos_token_id"] = [1, 106]

    edit_json(os.path.join(out, "tokenizer.json"), bos)
    edit_json(os.path.join(out, "tokenizer_config.json"), config)
    edit_json(os.path.join(out, "generation_config.json"), stops)
    # The fixes hold: a completion prompt starts with <bos>.
    check = AutoTokenizer.from_pretrained(out)
    ids = check("hello").input_ids
    if ids[0] != 2:
        print(f"vllm_model: the tokenizer does not add <bos>: {ids}", file=sys.stderr)
        return 1
    print(f"vllm_model: {out} (bfloat16, <bos> added, stops at 1 and 106)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
