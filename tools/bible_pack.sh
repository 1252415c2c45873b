#!/usr/bin/env bash
# bible_pack.sh - build data/bible_en_es.tsv.gz, the English -> Spanish verse
# pairs of the translation task, from two public-domain Bibles that Debian
# ships as SWORD modules: sword-text-web (the World English Bible, module
# engWEB2015eb) and sword-text-sparv (the Reina-Valera 1909, spaRV1909eb),
# read with diatheke.
#
#   bash tools/bible_pack.sh          # installs the three packages (apt-get, as root) if missing
#
# Steps: diatheke writes each Bible in the module's own markup (OSIS), one
# verse a line "Book C:V: text"; the verses are joined on (book, chapter,
# verse) - only the 66 books both have, in the Spanish module's order; a verse
# empty on either side (25: the two Bibles number a few verses differently)
# is left out. The markup is stripped (below); the split is drawn by whole
# chapters; every valid and test verse is checked for a near-duplicate in the
# training part. The file's layout and the figures are in data/README.md.
#
# Stripping: a section heading, psalm title, speaker label or note
# (<title>, <speaker>, <note> and what they hold) goes; word elements
# (<w savlm="strong:H0430">God</w>: the Strong's numbers live in their
# attributes) keep their words, and two word elements with nothing between
# them get a space (the WEB has "Godcreated" in 103 places), and so do a
# word and a word the 1909 translators added (<transChange>: "Abram" "de
# allí") unless the added word is a pronoun joined to its verb ("Júrame" "lo"
# is "Júramelo"); any other tag
# (line, paragraph and chapter marks) becomes a space; text after a chapter's
# end mark (the WEB glossary after Revelation 22:21) goes; entities are
# decoded and runs of white space become one space. In the Spanish, the
# Hebrew letter before every eighth verse of Psalm 119 ("ALEPH.") goes, and
# the capitals that open a chapter ("EN el principio", "DE SIETE años",
# "EMPERO Jehová") are written as ordinary words ("En el principio", "De
# siete años", "Empero Jehová"). The 1909
# spelling ("fué", "á", "Ezechîas") is kept as printed.
#
# The split: a chapter goes to test when the CRC-32 of "Book C" (e.g.
# "Genesis 12") is 0 mod 20, to valid when it is 1 mod 20, else to train.
# Output: gzip -9 -n (no name or time stamp), so two runs write the same
# bytes. Run from the repository root. Nothing in the build or the tests runs
# this: the result is committed.
set -euo pipefail

need=()
command -v diatheke >/dev/null || need+=(diatheke)
[ -d /usr/share/sword/modules/texts/ztext/engWEB2015eb ] || need+=(sword-text-web)
[ -d /usr/share/sword/modules/texts/ztext/spaRV1909eb ] || need+=(sword-text-sparv)
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
diatheke -b engWEB2015eb -k Gen-Rev >"$work/en.osis"
diatheke -b spaRV1909eb -k Gen-Rev >"$work/es.osis"

/usr/bin/python3 - "$work/en.osis" "$work/es.osis" "$work/bible.tsv" <<'PY'
import collections, difflib, html, re, sys, zlib

# A pronoun the 1909 text writes onto its verb: <w>Júrame</w><transChange>lo</transChange> is "Júramelo".
ENCLITICS = 'lo|la|los|las|le|les|me|te|se|nos|os'
REF = re.compile(r'((?:[1-3] )?[A-Z][A-Za-z ]*?) (\d+):(\d+): ')

def clean(t):
    t = t.split('<chapter eID=')[0]
    for tag in ('title', 'note', 'speaker'):
        t = re.sub(r'<%s\b[^>]*>.*?</%s>' % (tag, tag), ' ', t)
    t = t.replace('</w><w', '</w> <w').replace('</transChange><w', '</transChange> <w')
    t = re.sub(r'</w>(?=<transChange\b[^>]*>(?!(?:%s)<)[^<])' % ENCLITICS, '</w> ', t)
    t = re.sub(r'</?(w|transChange|q|seg|name)\b[^>]*>', '', t)
    t = re.sub(r'<[^>]*>', ' ', t)
    return ' '.join(html.unescape(t).split())

def parse(path):
    verses = collections.OrderedDict()
    for line in open(path, encoding='utf-8'):
        m = REF.search(line)
        if m:   # lines without "Book C:V: " are diatheke's module name, or books the other Bible lacks
            verses[(m.group(1), int(m.group(2)), int(m.group(3)))] = clean(line[m.end():].rstrip('\n'))
    return verses

CAPS = 'A-ZÁÉÍÓÚÑÜ'
OPENING = re.compile(r'^((?:[%s]{2,}[,.;:]? )+)(?=\S*[a-záéíóúñü])' % CAPS)

def spanish(book, chapter, verse, s):
    if book == 'Psalms' and chapter == 119 and verse % 8 == 1:
        s = re.sub(r'^[%s]+\.? ' % CAPS, '', s)
    m = OPENING.match(s)
    if m:
        s = m.group(1)[0] + m.group(1)[1:].lower() + s[m.end():]
    return s

en = parse(sys.argv[1])
es = parse(sys.argv[2])
rows, dropped = [], 0
for (b, c, v), s in es.items():
    e = en.get((b, c, v), '')
    s = spanish(b, c, v, s)
    if e == '' or s == '':
        dropped += 1
        continue
    part = {0: 'test', 1: 'valid'}.get(zlib.crc32(('%s %d' % (b, c)).encode()) % 20, 'train')
    rows.append([part, b, c, v, e, s])

# Near-duplicates: a valid or test verse whose words (lower case, letters and
# digits only) equal a training verse's, or are at least 0.8 similar to one
# (difflib's ratio 2M/T over words, tried on training verses sharing at
# least a third of its word trigrams), in English or in Spanish.
def words(t):
    return re.findall(r'\w+', t.lower())

def trigrams(w):
    return {tuple(w[i:i + 3]) for i in range(len(w) - 2)}

def near_duplicates(col):
    train = [words(r[col]) for r in rows if r[0] == 'train']
    exact = {tuple(w) for w in train}
    index = collections.defaultdict(list)
    for i, w in enumerate(train):
        for g in trigrams(w):
            index[g].append(i)
    found = {}
    for k, r in enumerate(rows):
        if r[0] == 'train':
            continue
        w = words(r[col])
        if tuple(w) in exact:
            found[k] = 'exact'
            continue
        g = trigrams(w)
        shared = collections.Counter(i for x in g for i in set(index.get(x, ())))
        best = max([difflib.SequenceMatcher(None, w, train[i], autojunk=False).ratio()
                    for i, n in shared.items() if 3 * n >= len(g)] or [0.0])
        if best >= 0.8:
            found[k] = 'near'
    return found

dup_en, dup_es = near_duplicates(4), near_duplicates(5)
with open(sys.argv[3], 'w', encoding='utf-8', newline='\n') as out:
    out.write('split\tbook\tchapter\tverse\tnear_dup\tenglish\tspanish\n')
    for k, r in enumerate(rows):
        out.write('%s\t%s\t%d\t%d\t%d\t%s\t%s\n' % (r[0], r[1], r[2], r[3], int(k in dup_en or k in dup_es), r[4], r[5]))

print('%d pairs (%d verses left out: empty on one side)' % (len(rows), dropped))
for part in ('train', 'valid', 'test'):
    ks = [k for k, r in enumerate(rows) if r[0] == part]
    n = lambda d, what: sum(d.get(k) == what for k in ks)
    print('%-5s %6d pairs %5d chapters; near-duplicates of a training verse: English %d exact + %d near, '
          'Spanish %d exact + %d near, either %d' % (
              part, len(ks), len({(rows[k][1], rows[k][2]) for k in ks}), n(dup_en, 'exact'), n(dup_en, 'near'),
              n(dup_es, 'exact'), n(dup_es, 'near'), sum(k in dup_en or k in dup_es for k in ks)))
for col, lang in ((4, 'English'), (5, 'Spanish')):
    lens = sorted(len(r[col].split()) for r in rows)
    bucket = collections.Counter(min((x - 1) // 10, 4) for x in lens)
    print('%s words a verse: min %d, median %d, 90th percentile %d, max %d; 1-10: %d, 11-20: %d, 21-30: %d, '
          '31-40: %d, 41+: %d' % ((lang, lens[0], lens[len(lens) // 2], lens[int(0.9 * len(lens))], lens[-1])
                                  + tuple(bucket[i] for i in range(5))))
PY

gzip -9 -n -c "$work/bible.tsv" >data/bible_en_es.tsv.gz
echo "wrote data/bible_en_es.tsv.gz ($(wc -c <data/bible_en_es.tsv.gz) bytes)"
