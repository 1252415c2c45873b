#!/usr/bin/env python3
"""bleu_check.py - BLEU by NLTK on a file of translations, compared with the
C code's (common/train/bleu.c, through build/tools/bleu_score).

    make build/tools/bleu_score && /usr/bin/python3 tools/bleu_check.py [--build build] FILE.tsv
    /usr/bin/python3 tools/bleu_check.py --write-golden GOLDEN FILE.tsv     # NLTK's figures only

FILE.tsv has a header naming its tab-separated columns, among them
"reference" and "output" (detokenised text) and optionally "source" (its words
give the length bucket: 1-10, 11-20, 21-30, 31-40, 41+), as translations.tsv
and tests/data/bleu_pairs.tsv do. Both texts are cut into tokens by
sacreBLEU's tokeniser 13a (written out below from sacreBLEU's regular
expressions); NLTK's corpus_bleu (no smoothing) gives corpus BLEU overall and
in each bucket, its sentence_bleu with SmoothingFunction().method3 each
sentence BLEU (both times 100). The script compares the C program's tokens
(exactly) and scores (to 0.01) and exits 1 at a difference. --write-golden
writes NLTK's figures as key=value lines instead (tests/test_bleu.c reads
tests/data/bleu_pairs.nltk, made this way).
"""
import argparse
import re
import subprocess
import sys
import warnings

from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu, sentence_bleu

BUCKETS = ['1-10', '11-20', '21-30', '31-40', '41+']
RULES = [
    (re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
    (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
    (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
    (re.compile(r'([0-9])(-)'), r'\1 \2 '),
]


def tokenize_13a(line):
    for a, b in (('<skipped>', ''), ('-\n', ''), ('\n', ' '), ('&quot;', '"'), ('&amp;', '&'), ('&lt;', '<'),
                 ('&gt;', '>')):
        line = line.replace(a, b)
    line = ' %s ' % line
    for rule, replacement in RULES:
        line = rule.sub(replacement, line)
    return line.split()


def bucket(words):
    return 0 if words <= 10 else 4 if words > 40 else (words - 1) // 10


def read_pairs(path):
    with open(path, encoding='utf-8', newline='\n') as f:
        lines = f.read().split('\n')
    header = lines[0].split('\t')
    ref, out = header.index('reference'), header.index('output')
    src = header.index('source') if 'source' in header else None
    pairs = []
    for line in lines[1:]:
        if line == '':
            continue
        fields = line.split('\t')
        words = len(fields[src].split()) if src is not None else 1
        pairs.append((fields[ref], fields[out], words))
    return pairs


def nltk_figures(pairs):
    refs = [[tokenize_13a(r)] for r, _, _ in pairs]
    outs = [tokenize_13a(o) for _, o, _ in pairs]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')       # NLTK warns when an order has no match (BLEU 0)
        figures = {'pairs': len(pairs), 'corpus_bleu': 100 * corpus_bleu(refs, outs)}
        for b, name in enumerate(BUCKETS):
            idx = [i for i, (_, _, w) in enumerate(pairs) if bucket(w) == b]
            figures['bucket_' + name] = (100 * corpus_bleu([refs[i] for i in idx], [outs[i] for i in idx])
                                         if idx else 0.0)
            figures['bucket_%s_pairs' % name] = len(idx)
        smooth = SmoothingFunction().method3
        for i in range(len(pairs)):
            figures['sentence_%d' % (i + 1)] = 100 * sentence_bleu(refs[i], outs[i], smoothing_function=smooth)
    return figures, refs, outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--build', default='build')
    ap.add_argument('--write-golden', metavar='GOLDEN')
    ap.add_argument('file')
    args = ap.parse_args()
    pairs = read_pairs(args.file)
    figures, refs, outs = nltk_figures(pairs)

    if args.write_golden:
        with open(args.write_golden, 'w', encoding='utf-8') as f:
            f.write('# NLTK %s corpus_bleu / sentence_bleu (method3) x 100 on the 13a tokens of %s,\n'
                    '# written by tools/bleu_check.py --write-golden\n' % (__import__('nltk').__version__,
                                                                        args.file))
            for k, v in figures.items():
                f.write('%s=%s\n' % (k, ('%.6f' % v) if isinstance(v, float) else v))
        print('wrote %s (%d pairs, corpus BLEU %.4f)' % (args.write_golden, len(pairs), figures['corpus_bleu']))
        return 0

    c = subprocess.run(['%s/tools/bleu_score' % args.build, args.file], check=True, capture_output=True,
                       text=True, encoding='utf-8').stdout.split('\n')
    c_sentence = [float(l.split('=', 1)[1]) for l in c if l.startswith('sentence_bleu=')]
    c_out = [l.split('=', 1)[1].split() for l in c if l.startswith('output_tokens=')]
    c_ref = [l.split('=', 1)[1].split() for l in c if l.startswith('reference_tokens=')]
    c_corpus = float(next(l for l in c if l.startswith('corpus_bleu=')).split('=', 1)[1])
    c_bucket = {m.group(1): float(m.group(2)) for m in (re.match(r'bucket=(\S+) pairs=\d+ bleu=(\S+)', l) for l in c)
                if m}
    for i in range(len(pairs)):
        if c_out[i] != outs[i] or c_ref[i] != refs[i][0]:
            print('pair %d: 13a tokens differ:\n  C      %s | %s\n  Python %s | %s' % (
                i + 1, c_out[i], c_ref[i], outs[i], refs[i][0]))
            return 1
    short = sum(len(o) < 4 for o in outs)
    worst = abs(c_corpus - figures['corpus_bleu'])
    if worst > 0.01:
        print('corpus BLEU: C %.4f, NLTK %.4f' % (c_corpus, figures['corpus_bleu']))
        if short:
            print('%d outputs have fewer than 4 tokens: NLTK counts each as one n-gram of every order it lacks '
                  '(its max(1, count) denominators), Papineni et al., sacreBLEU and the C code count none' % short)
        return 1
    for name in BUCKETS:
        d = abs(c_bucket[name] - figures['bucket_' + name])
        if d > 0.01:
            print('bucket %s: C %.4f, NLTK %.4f' % (name, c_bucket[name], figures['bucket_' + name]))
            return 1
        worst = max(worst, d)
    for i, s in enumerate(c_sentence):
        d = abs(s - figures['sentence_%d' % (i + 1)])
        if d > 0.01:
            print('pair %d: sentence BLEU C %.4f, NLTK %.4f' % (i + 1, s, figures['sentence_%d' % (i + 1)]))
            return 1
        worst = max(worst, d)
    print('%d pairs: the same 13a tokens; corpus BLEU C %.4f, NLTK %.4f; by source length %s; '
          'sentence BLEU too; largest difference %.2g' % (
              len(pairs), c_corpus, figures['corpus_bleu'],
              ', '.join('%s %.2f' % (n, c_bucket[n]) for n in BUCKETS), worst))
    return 0


if __name__ == '__main__':
    sys.exit(main())
