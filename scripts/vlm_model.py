"""Builds a tiny Qwen2-VL vision-language model with random weights, for goodput's image tests
against vLLM CPU: no VLM weights can be downloaded here, so the architecture is made from a
configuration (two vision blocks, two text layers, width 128), its tokenizer trained in code on
a few sentences (byte-level BPE, with Qwen2-VL's special tokens), its image processor Qwen2-VL's
own with its defaults (14-pixel patches merged 2x2: an image of W x H pixels, both multiples of
28, is (W/28)*(H/28) image tokens between <|vision_start|> and <|vision_end|>). Its outputs are
noise; its timing, image handling and token accounting are vLLM's. Called by
scripts/vllm.sh install; not imported by anything else.

Usage: vlm_model.py OUT_DIR
"""

import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    Qwen2TokenizerFast,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessor,
    Qwen2VLProcessor,
    Qwen2VLVideoProcessor,
)

SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2-VL's template, reduced: each image part is its placeholder between the vision markers.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ['image', 'image_url'] %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a picture of a cat sitting on a mat in the sun",
    "describe the image in one short sentence please",
    "what colour is the sky in this photograph",
    "numbers 0 1 2 3 4 5 6 7 8 9 and words and more words",
] * 50


def tokenizer(out: str) -> Qwen2TokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def main() -> int:
    out = sys.argv[1]
    torch.manual_seed(0)
    tok = tokenizer(out)
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL}
    # The text model's and the whole model's: the tokenizer's, not Qwen2's 151k vocabulary's.
    token_ids = dict(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=len(tok),
            # Heads of 64: vLLM's CPU attention kernels take no smaller head.
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=4096,
            rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]},
            tie_word_embeddings=True,
            torch_dtype="bfloat16",
            **token_ids,
        ),
        vision_config=dict(
            depth=2,
            embed_dim=64,
            hidden_size=128,
            num_heads=1,
            mlp_ratio=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            in_chans=3,
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
        **token_ids,
    )
    model = Qwen2VLForConditionalGeneration(config).to(torch.bfloat16)
    model.generation_config.eos_token_id = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    model.save_pretrained(out)
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(),
        tokenizer=tok,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)
    print(f"vlm_model: {out} (Qwen2-VL, random weights, vocabulary {len(tok)})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
