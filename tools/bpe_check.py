#!/usr/bin/env python3
"""bpe_check.py - an independent byte-pair encoding, written from Sennrich,
Haddow and Birch 2016 (Algorithm 1), compared with the C one
(common/data/bpe.c, through build/tools/bpe_dump) on the translation corpus.

    make build/tools/bpe_dump && /usr/bin/python3 tools/bpe_check.py [--build build] [--side en|es|both]
                                                                   [--merges N] [--encode K] [--corpus PATH]

Both learn N merges (default 1000) on the training part's words (text cut at
blanks), each word as its characters and the marker </w>; each merge joins the
most frequent adjacent pair, ties going to the pair whose left, then right,
symbol comes first in byte order ("</w>" spelt out), until no pair occurs
twice. The script compares the two lists of merges, then the token ids of the
first K test verses (default 200) under the C program's id rule (bpe.h: 4 is
</w>, 5.. the alphabet in byte order, then each new symbol in order of
creation). It also checks the paper's own example (low, lower, newest,
widest). Prints what matched; exits 1 at the first difference. Uses the
Python standard library only.
"""
import argparse
import collections
import gzip
import subprocess
import sys

END = '</w>'


def key(symbol):
    """The tie rule's order: the symbol's text in UTF-8 bytes, </w> spelt out."""
    return symbol.encode('utf-8')


def learn(word_counts, n_merges):
    """Algorithm 1: vocab maps a word's symbols (a tuple) to its count."""
    vocab = {tuple(word) + (END,): count for word, count in word_counts.items()}
    merges = []
    while len(merges) < n_merges:
        pairs = collections.Counter()
        for symbols, count in vocab.items():
            for a, b in zip(symbols, symbols[1:]):
                pairs[a, b] += count
        best = None
        for pair, count in pairs.items():
            if count < 2:
                continue
            if best is None or count > pairs[best] or (
                    count == pairs[best] and (key(pair[0]), key(pair[1])) < (key(best[0]), key(best[1]))):
                best = pair
        if best is None:
            break
        merges.append((best, pairs[best]))
        joined = best[0] + best[1]
        new_vocab = {}
        for symbols, count in vocab.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            new_vocab[tuple(out)] = new_vocab.get(tuple(out), 0) + count
        vocab = new_vocab
    return merges


def alphabet(word_counts):
    return sorted({ch for word in word_counts for ch in word}, key=key)


def ids_of(alpha, merges):
    """Symbol -> id: 4 </w>, 5.. the alphabet, then new symbols in order of creation."""
    ids = {END: 4}
    for ch in alpha:
        ids[ch] = len(ids) + 4
    for (a, b), _ in merges:
        ids.setdefault(a + b, len(ids) + 4)
    return ids


def encode(text, merges, ids):
    rank = {pair: r for r, (pair, _) in enumerate(merges)}
    out = []
    for word in text.split():
        symbols = list(word) + [END]
        while True:
            ranked = [(rank[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in rank]
            if not ranked:
                break
            _, i = min(ranked)
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        out.extend(ids.get(s, 3) for s in symbols)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--build', default='build')
    ap.add_argument('--side', default='en', choices=['en', 'es', 'both'])
    ap.add_argument('--merges', type=int, default=1000)
    ap.add_argument('--encode', type=int, default=200)
    ap.add_argument('--corpus', default='data/bible_en_es.tsv.gz')
    args = ap.parse_args()

    textbook = learn({'low': 5, 'lower': 2, 'newest': 6, 'widest': 3}, 100)
    first = [' '.join(p) for p, _ in textbook[:5]]
    if first != ['e s', 'es t', 'est </w>', 'l o', 'lo w']:
        print('textbook example: first merges %s, the paper has e s, es t, est </w>, l o, lo w' % first)
        return 1
    print('textbook example: %d merges, the first five as in the paper: %s' % (len(textbook), ', '.join(first)))

    cols = {'en': [5], 'es': [6], 'both': [5, 6]}[args.side]
    train, test = [], {5: [], 6: []}
    with gzip.open(args.corpus, 'rt', encoding='utf-8', newline='\n') as f:
        next(f)
        for line in f:
            fields = line.rstrip('\n').split('\t')
            if fields[0] == 'train':
                train.extend(fields[c] for c in cols)
            elif fields[0] == 'test':
                for c in cols:
                    test[c].append(fields[c])
    counts = collections.Counter(w for t in train for w in t.split())
    merges = learn(counts, args.merges)
    alpha = alphabet(counts)
    ids = ids_of(alpha, merges)

    c_out = subprocess.run(['%s/tools/bpe_dump' % args.build, '--side', args.side, '--merges', str(args.merges),
                            '--encode', str(args.encode), args.corpus],
                           check=True, capture_output=True, text=True, encoding='utf-8').stdout.split('\n')
    kv = [line.split('=', 1) for line in c_out if '=' in line]
    c_alpha = next(v for k, v in kv if k == 'bpe_alphabet')
    if c_alpha != ''.join(alpha):
        print('alphabets differ: C %r, Python %r' % (c_alpha, ''.join(alpha)))
        return 1
    c_merges = [v for k, v in kv if k.startswith('bpe_merge_')]
    py_merges = [a + ' ' + b for (a, b), _ in merges]
    if len(c_merges) != len(py_merges):
        print('C learned %d merges, Python %d' % (len(c_merges), len(py_merges)))
        return 1
    for r, (c, p) in enumerate(zip(c_merges, py_merges)):
        if c != p:
            print('merge %d differs: C "%s", Python "%s" (count %d)' % (r + 1, c, p, merges[r][1]))
            return 1
    print('%s side, %d training words (%d distinct), %d characters: the %d merges are identical' % (
        args.side, sum(counts.values()), len(counts), len(alpha), len(py_merges)))

    c_ids = [v for k, v in kv if k == 'ids']
    py_ids = [' '.join(map(str, encode(t, merges, ids)))
              for c in cols for t in test[c][:args.encode]]
    if len(c_ids) != len(py_ids):
        print('C encoded %d verses, Python %d' % (len(c_ids), len(py_ids)))
        return 1
    tokens = 0
    for i, (c, p) in enumerate(zip(c_ids, py_ids)):
        if c != p:
            print('test verse %d: token ids differ:\n  C      %s\n  Python %s' % (i + 1, c, p))
            return 1
        tokens += len(p.split())
    print('token ids of %d test verses (%d tokens, V = %d) are identical' % (len(py_ids), tokens, len(ids) + 4))
    return 0


if __name__ == '__main__':
    sys.exit(main())
