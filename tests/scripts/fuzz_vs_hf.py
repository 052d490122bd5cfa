#!/usr/bin/env python3
"""Differential fuzzing of cloze's tokenizers against HF's fast ones (not a
ctest: needs transformers, e.g. a venv with transformers==4.57.1).

Random strings from a pool of tricky characters (controls, Zs/Zl/Zp, format
chars, accents and combining marks, CJK, Hangul, emoji, astral, apostrophe
contractions, whitespace runs) and, with --any, random code points of all
planes. Prints mismatches. Usage:
    /tmp/hf457/bin/python tests/scripts/fuzz_vs_hf.py BUILD_DIR SHARED_DATA [seed] [--any]
"""
import random
import subprocess
import sys

from transformers import BertTokenizerFast, GPT2TokenizerFast

build, data = sys.argv[1], sys.argv[2]
seed = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 0
any_cp = "--any" in sys.argv
random.seed(seed)
pool = list("aAbZz09 '\t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u2029\u3000\u200b\u200d\ufeff\u00ad") + \
    list("éÉñÑçÇßİıΣσςΑΩЖжÅåØø½²³①ⅫⅨ中文字日本語한국어ąęį̇̀́̃") + \
    list("!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»—–…·•€£¥©®™°±×÷") + \
    ["😀", "👍🏽", "🇺🇸", "𝒜", "𠀀", "\U000e0001", "\ue000", "\x00", "\ufffd", "\u0378",
     "'s", "'ll", "'re", "'ve", "'d", "'m", "'t", "  ", "   ", "\n\n", " \n "]


def any_char():
    lo, hi = random.choice([(0x80, 0x2FFF), (0x3000, 0xD7FF), (0xE000, 0xFFFF),
                            (0x10000, 0x10FFFF), (0x1F000, 0x1FAFF)])
    return chr(random.randint(lo, hi))


def text():
    n = random.randint(0, 40)
    if any_cp:
        return "".join(random.choice(pool) if random.random() < 0.6 else any_char() for _ in range(n))
    return "".join(random.choice(pool) for _ in range(n))


texts = [text() for _ in range(20000)]
inp = "".join(t.encode().hex() + "\n" for t in texts).encode()
vocab = data + "/vocab/bert-base-uncased/vocab.txt"
enc, mer = data + "/vocab/gpt2/encoder.json", data + "/vocab/gpt2/vocab.bpe"
exe = build + "/tests/test_tokenizers"
for name, tok, args in [("wordpiece", BertTokenizerFast(vocab), ["w", vocab]),
                        ("gpt2-bpe", GPT2TokenizerFast(enc, mer), ["b", enc, mer])]:
    out = subprocess.run([exe, "--encode-hex"] + args, input=inp, capture_output=True,
                         env={"CLOZE_SHARED_DATA": data}, check=True).stdout.decode().split("\n")
    bad = 0
    for t, o in zip(texts, out):
        want = tok.encode(t, add_special_tokens=False)
        got = [int(x) for x in o.split()]
        if want != got:
            bad += 1
            if bad <= 5:
                print(name, repr(t), "\n  hf   ", want, "\n  cloze", got)
    print("%s: %d of %d strings differ (seed %d%s)" % (name, bad, len(texts), seed,
                                                       ", any code point" if any_cp else ""))
