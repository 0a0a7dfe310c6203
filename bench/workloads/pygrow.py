"""pygrow: Python-style growth of medium objects (run by the system python3 under LD_PRELOAD
with PYTHONMALLOC=malloc, so every object goes through malloc). Objects are grown the way Python
programs grow them, each to a target of 8 KiB..2 MiB of storage:
  lists appended to / extended (list_resize: realloc with 1/8 over-allocation),
  dicts filled key by key through every resize (a new table, the old one freed),
  bytearrays extended with += (realloc with over-allocation),
  str built with += (in-place realloc, no over-allocation),
  bytes built by repeated concatenation (b = b + piece: a new block each step) and by join.
Many are alive at once (a budget of live storage); the target sizes come from bands that change
from epoch to epoch (8-32 KiB, 32-128 KiB, 128-512 KiB, 512 KiB-2 MiB), and when the budget is
full, random live objects are dropped (and verified) to make room, so blocks of one size range are
freed while other ranges are needed. Prints a digest; the harness checks it equals the reference
run, and a wrong object exits with status 3. usage: pygrow.py [scale=6] [budget_mib=48]"""
import hashlib
import sys

KiB = 1024
BANDS = [(8 * KiB, 32 * KiB), (32 * KiB, 128 * KiB), (128 * KiB, 512 * KiB), (512 * KiB, 2048 * KiB)]
# band weights per epoch: small ones, then the big ones, then the middle, then everything
EPOCHS = [(6, 2, 0, 0), (0, 0, 1, 6), (1, 6, 1, 0), (0, 1, 6, 1), (2, 2, 2, 2)]
M64 = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        self.s = seed & M64 or 1

    def next(self):  # xorshift64*
        x = self.s
        x ^= x >> 12
        x ^= (x << 25) & M64
        x ^= x >> 27
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & M64

    def below(self, n):
        return self.next() % n

    def logsize(self, lo, hi):  # log-uniform in [lo, hi)
        b = self.next() / float(M64 + 1)
        return int(lo * (hi / lo) ** b)


# shared building material, made once: the objects grow by reference to these
KEYS_INT = list(range(100000, 100000 + 70000))
KEYS_STR = ["key%06d" % i for i in range(70000)]
CHUNKS = [[KEYS_STR[j] for j in range(i, i + n)] for i, n in enumerate((1, 3, 7, 8, 16, 24, 31, 32, 48, 64))]
BPIECES = [bytes((i * 7 + j) & 0xFF for j in range(n)) for i, n in enumerate((61, 256, 700, 1024, 2500, 4096, 9000, 16384))]
SPIECES = [("".join(chr(97 + (i + j) % 26) for j in range(n))) for i, n in enumerate((50, 200, 640, 1500, 4096, 8192, 16000))]


def pick(pieces, want):  # the largest piece not above want (or the smallest)
    best = pieces[0]
    for p in pieces:
        if len(p) <= want:
            best = p
    return best


def grow_list(rng, target):
    n = target // 8
    lst = []
    if n <= 16384:
        app = lst.append
        for i in range(n):
            app(KEYS_INT[i])
    else:
        while len(lst) < n:
            lst += CHUNKS[rng.below(len(CHUNKS))]
    return lst


def grow_dict(rng, target):
    d = {}
    if rng.below(2):  # int keys: 24-byte entries
        keys, n = KEYS_INT, min(len(KEYS_INT), target // 36)
        for i in range(n):
            d[keys[i]] = i
    else:  # str keys: a unicode-keyed table, filled through update()
        keys, n = KEYS_STR, min(len(KEYS_STR), target // 26)
        step = 64 + rng.below(512)
        for a in range(0, n, step):
            d.update(zip(keys[a:min(n, a + step)], KEYS_INT))
    return d


def grow_bytearray(rng, target):
    b = bytearray()
    piece = pick(BPIECES, max(64, target // (40 + rng.below(200))))
    while len(b) < target:
        b += piece
    return b


def grow_str(rng, target):
    s = ""
    piece = pick(SPIECES, max(50, target // (60 + rng.below(100))))
    while len(s) < target:
        s += piece
    return s


def grow_bytes(rng, target):
    if rng.below(2):  # repeated concatenation, a new object each step
        b = b""
        piece = pick(BPIECES, max(64, target // 24))
        while len(b) < target:
            b = b + piece
        return b
    parts = []
    total = 0
    while total < target:
        p = BPIECES[rng.below(len(BPIECES))]
        parts.append(p)
        total += len(p)
    if rng.below(2):
        return b"".join(parts)
    return "".join(SPIECES[len(p) % len(SPIECES)] for p in parts[: len(parts) // 2 + 1]).encode()


KINDS = [grow_list, grow_dict, grow_bytearray, grow_str, grow_bytes]


def fingerprint(obj):
    n = len(obj)
    if isinstance(obj, list):
        return (n, obj[0], obj[n // 2], obj[-1])
    if isinstance(obj, dict):
        k = next(iter(obj))
        return (n, k, obj[k])
    return (n, obj[:48], obj[n // 2: n // 2 + 48], obj[-48:])


def main():
    for a in sys.argv[1:]:
        if a in ("-h", "--help"):
            print(__doc__)
            sys.exit(0)
        if a.startswith("-"):
            sys.stderr.write("pygrow.py: unknown option '%s' (see --help)\n" % a)
            sys.exit(2)
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    budget = (int(sys.argv[2]) if len(sys.argv) > 2 else 48) << 20
    rng = Rng(0x5EED0F9E0)
    h = hashlib.sha256()
    live = []  # [obj, size, fingerprint]
    used = 0
    built = dropped = 0

    def drop(i):
        nonlocal used, dropped
        obj, size, fp = live[i]
        if fingerprint(obj) != fp:
            print("pygrow: object of %s corrupted" % type(obj).__name__, file=sys.stderr)
            sys.exit(3)
        used -= size
        live[i] = live[-1]
        live.pop()
        dropped += 1

    for e in range(scale):
        weights = EPOCHS[e % len(EPOCHS)]
        bands = [b for b, w in zip(BANDS, weights) for _ in range(w)]
        # this epoch builds twice the budget; a third of what is alive goes first
        for _ in range(len(live) // 3):
            drop(rng.below(len(live)))
        made = 0
        while made < 2 * budget:
            lo, hi = bands[rng.below(len(bands))]
            target = rng.logsize(lo, hi)
            while live and used + target > budget:
                drop(rng.below(len(live)))
            obj = KINDS[rng.below(len(KINDS))](rng, target)
            fp = fingerprint(obj)
            live.append([obj, target, fp])
            used += target
            made += target
            built += 1
            h.update(repr(fp).encode())
        h.update(("epoch %d live %d" % (e, len(live))).encode())
    while live:
        drop(len(live) - 1)
    print("pygrow", scale, built, dropped, h.hexdigest())


main()
