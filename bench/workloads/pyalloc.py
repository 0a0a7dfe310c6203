"""pyalloc: an allocation-heavy Python program (run by the system python3 under
LD_PRELOAD with PYTHONMALLOC=malloc, so every object goes through malloc).
Builds and tears down dicts, lists, strings, tuples, objects and JSON documents and
prints a digest of what it computed; the harness checks the output is identical to
the reference run. usage: pyalloc.py [scale=20]"""
import hashlib
import json
import sys


class Node:
    __slots__ = ("key", "val", "kids")

    def __init__(self, key, val):
        self.key = key
        self.val = val
        self.kids = []


def tree(depth, seed):
    n = Node(seed, str(seed) * (seed % 7 + 1))
    if depth:
        n.kids = [tree(depth - 1, seed * 3 + i) for i in range(3)]
    return n


def walk(n):
    total = len(n.val)
    for k in n.kids:
        total += walk(k)
    return total


def main():
    for a in sys.argv[1:]:
        if a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        if a.startswith("-"):
            sys.stderr.write("pyalloc.py: unknown option '%s' (see --help)\n" % a)
            sys.exit(2)
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    h = hashlib.sha256()
    for r in range(scale):
        d = {}
        for i in range(20000):
            k = "k%d_%d" % (r, i * 7919 % 20011)
            d[k] = [i, k.upper(), (i, r), {"x": i % 13}]
        ks = sorted(d)
        h.update(("".join(ks[:: 997])).encode())
        doc = json.dumps([d[k] for k in ks[:3000]], sort_keys=True)
        back = json.loads(doc)
        h.update(str(len(doc)).encode() + str(back[-1]).encode())
        words = (" ".join(k for k in ks if k.endswith("3"))).split()
        h.update(str(len(words)).encode())
        t = tree(6, r)
        h.update(str(walk(t)).encode())
        del d, ks, doc, back, words, t
    print("pyalloc", scale, h.hexdigest())


main()
