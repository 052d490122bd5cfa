#!/usr/bin/env python3
"""Rebuilds cz_data samples independently and compares them with the C output.

The BERT rules are transcribed from create_pretraining_data.py of
google-research/bert (create_instances_from_document, truncate_seq_pair,
create_masked_lm_predictions) working on Python lists of sentences read from
the plain-text copy of the corpus, not from the shards. The random numbers
are cloze's (Philox4x32-10 keyed as in include/cloze/rng.h, checked here
against Random123's known-answer vectors) drawn in the order docs/data.md
gives, so every sample must match token for token.

usage: test_data_reference.py <data_dump executable>
"""
import os
import struct
import subprocess
import sys
import tempfile

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
INSTANCE, SHUFFLE = 3, 4
PAD, CLS, SEP, MASK, EOT = 0, 2, 3, 4, 5


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def philox(counter, key):
    """Philox4x32-10 (Salmon et al., SC'11): counter 4 words, key 2 words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


class Stream:
    def __init__(self, seed, purpose, a=0, b=0, c=0):
        self.key = (seed & M32, seed >> 32)
        h = splitmix64(purpose)
        for v in (a, b, c):
            h = splitmix64(h ^ v)
        self.stream = h
        self.cache = {}

    def u32(self, i):
        blk = i >> 2
        if blk not in self.cache:
            self.cache[blk] = philox((blk & M32, blk >> 32, self.stream & M32, self.stream >> 32), self.key)
        return self.cache[blk][i & 3]

    def u64(self, i):
        return (self.u32(i) << 32) | self.u32(i + 1)


class Cursor:
    """Sequential draws; each uniform or bounded draw uses two 32-bit words."""

    def __init__(self, stream):
        self.s, self.next = stream, 0

    def random(self):
        v = (self.s.u64(self.next) >> 11) * 2.0**-53
        self.next += 2
        return v

    def below(self, n):
        v = (self.s.u64(self.next) * n) >> 64
        self.next += 2
        return v

    def randint(self, lo, hi):  # Python's inclusive randint
        return lo + self.below(hi - lo + 1)


def permute(seed, epoch, n, i):
    """Feistel bijection of [0, n) with cycle walking (docs/data.md)."""
    if n <= 1:
        return 0
    h = 1
    while h < 32 and (1 << (2 * h)) < n:
        h += 1
    mask = (1 << h) - 1
    s = Stream(seed, SHUFFLE, epoch)
    x = i
    while True:
        l, r = x >> h, x & mask
        for rnd in range(6):
            l, r = r, l ^ (s.u32((rnd << 32) | r) & mask)
        x = (l << h) | r
        if x < n:
            return x


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def read_corpus(path):
    shards = []  # shards[k] = list of documents, a document = list of sentences
    for line in open(path):
        f = line.split()
        if f[0] == "D":
            k = int(f[1])
            while len(shards) <= k:
                shards.append([])
            shards[k].append([])
        else:
            shards[-1][-1].append([int(t) for t in f[1:]])
    return shards


def bert_sample(shards, anchors, seed, g, seq, max_pred, vocab_size, cont, short_seq_prob=f32(0.1)):
    n_items = len(anchors)
    epoch = g // n_items
    k, doc_i, s0 = anchors[permute(seed, epoch, n_items, g % n_items)]
    docs = shards[k]
    document = docs[doc_i]
    rng = Cursor(Stream(seed, INSTANCE, epoch, g))
    max_num_tokens = seq - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    current_chunk, current_length, i = [], 0, s0
    while i < len(document) and current_length < target_seq_length:
        current_chunk.append(document[i])
        current_length += len(document[i])
        i += 1
    a_end = 1
    if len(current_chunk) >= 2:
        a_end = rng.randint(1, len(current_chunk) - 1)
    tokens_a = [t for s in current_chunk[:a_end] for t in s]
    tokens_b = []
    if len(current_chunk) == 1 or rng.random() < 0.5:
        is_random_next = 1
        target_b_length = target_seq_length - len(tokens_a)
        for _ in range(10):
            random_document_index = rng.randint(0, len(docs) - 1)
            if random_document_index != doc_i:
                break
        random_document = docs[random_document_index]
        random_start = rng.randint(0, len(random_document) - 1)
        for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
                break
    else:
        is_random_next = 0
        for j in range(a_end, len(current_chunk)):
            tokens_b.extend(current_chunk[j])
    while len(tokens_a) + len(tokens_b) > max_num_tokens:  # truncate_seq_pair
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()
    tokens = [CLS] + tokens_a + [SEP] + tokens_b + [SEP]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)

    # create_masked_lm_predictions; "##" pieces join an adjacent preceding piece
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in (CLS, SEP):
            continue
        if cont is not None and cont[token] and cand_indexes and cand_indexes[-1][-1] == i - 1:
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    for i in reversed(range(1, len(cand_indexes))):  # random.shuffle
        j = rng.below(i + 1)
        cand_indexes[i], cand_indexes[j] = cand_indexes[j], cand_indexes[i]
    num_to_predict = min(max_pred, max(1, int(round(len(tokens) * 0.15))))
    chosen = []
    for index_set in cand_indexes:
        if len(chosen) >= num_to_predict:
            break
        if len(chosen) + len(index_set) > num_to_predict:
            continue
        chosen.extend(index_set)
    output = list(tokens)
    positions, labels = [], []
    for index in sorted(chosen):
        if rng.random() < 0.8:
            output[index] = MASK
        elif rng.random() < 0.5:
            pass
        else:
            output[index] = rng.randint(0, vocab_size - 1)
        positions.append(index)
        labels.append(tokens[index])
    n = len(tokens)
    pad = seq - n
    return {
        "nsp": is_random_next,
        "tokens": output + [PAD] * pad,
        "segments": segment_ids + [0] * pad,
        "attn": [1] * n + [0] * pad,
        "targets": [-1] * seq,
        "positions": positions + [0] * (max_pred - len(positions)),
        "labels": labels + [0] * (max_pred - len(labels)),
        "weights": [1.0] * len(positions) + [0.0] * (max_pred - len(positions)),
    }


def anchors_for(shards, seq):
    out = []
    for k, docs in enumerate(shards):
        for d, document in enumerate(docs):
            i = 0
            while i < len(document):
                first, length = i, 0
                while i < len(document) and length < seq - 3:
                    length += len(document[i])
                    i += 1
                if length > 0:
                    out.append((k, d, first))
    return out


def gpt_sample(stream, seed, g, seq, max_pred):
    n = (len(stream) - 1) // seq
    epoch = g // n
    p = permute(seed, epoch, n, g % n) * seq
    w = stream[p : p + seq + 1]
    return {"nsp": 0, "tokens": w[:seq], "segments": [0] * seq, "attn": [1] * seq,
            "targets": w[1:], "positions": [0] * max_pred, "labels": [0] * max_pred,
            "weights": [0.0] * max_pred}


def run(dump, arch, seq, max_pred, seed, n, wwm):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([dump, d, arch, str(seq), str(max_pred), str(seed), str(n), str(wwm)], check=True)
        shards = read_corpus(os.path.join(d, "corpus.txt"))
        vocab = open(os.path.join(d, "vocab.txt")).read().split("\n")[:-1]
        cont = [v.startswith("##") for v in vocab] if wwm else None
        lines = open(os.path.join(d, "samples.txt")).read().splitlines()
    n_items = int(lines[0].split()[1])
    if arch == "bert":
        anchors = anchors_for(shards, seq)
        assert n_items == len(anchors), f"samples per epoch {n_items}, reference {len(anchors)}"
    else:
        stream = [t for docs in shards for doc in docs for t in [x for s in doc for x in s] + [EOT]]
        assert n_items == (len(stream) - 1) // seq
    bad = 0
    names = ["tokens", "segments", "attn", "targets", "positions", "labels", "weights"]
    for line in lines[1:]:
        fields = line.split("|")
        g, nsp = map(int, fields[0].split())
        got = {"nsp": nsp}
        for name, text in zip(names, fields[1:]):
            got[name] = [float(v) if name == "weights" else int(v) for v in text.split()]
        want = (bert_sample(shards, anchors, seed, g, seq, max_pred, len(vocab), cont) if arch == "bert"
                else gpt_sample(stream, seed, g, seq, max_pred))
        for key in want:
            if got[key] != want[key]:
                bad += 1
                if bad <= 5:
                    print(f"{arch} g={g} {key}:\n  C  {got[key]}\n  py {want[key]}")
    print(f"{arch} seq={seq} wwm={wwm}: {len(lines) - 1} samples over {n_items} per epoch, {bad} mismatches")
    return bad


def main():
    # Random123 known-answer vectors, as in tests/test_core.c
    assert philox((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert philox((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == (
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)
    dump = sys.argv[1]
    bad = run(dump, "bert", 64, 10, 5, 400, 0)
    bad += run(dump, "bert", 48, 8, 6, 300, 1)
    bad += run(dump, "gpt", 32, 0, 7, 150, 0)
    if bad:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
