# Generates python_json.json: CPython json.dumps outputs used by tests/python_json.rs.
# Run from this folder with python3 (3.11 was used); the seed makes it deterministic.
import json, random, struct, sys

random.seed(1234)
specials = [0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 1e17,
            123456789012345678.0, 1234567890123456.0, 5e-324, 2.2250738585072014e-308,
            1.7976931348623157e308, float('nan'), float('inf'), -float('inf'), 1 / 3, 2 / 3,
            100.0, 1e22, 1e21, 0.30000000000000004, 9007199254740993.0, 4.35, 2.675, 1e-7,
            123.456e-10]
floats = list(specials)
for _ in range(1500):
    floats.append(struct.unpack('<d', struct.pack('<Q', random.getrandbits(64)))[0])
for _ in range(1500):
    floats.append(random.random() * 10 ** random.randint(-30, 30) * random.choice([1, -1]))
for _ in range(300):
    floats.append(float(random.randint(-10 ** 18, 10 ** 18)))
# Exact ties between two shortest candidates (x.xx5 at 17 digits): CPython rounds to even.
for _ in range(400):
    floats.append(random.randint(10 ** 13, 10 ** 15) + random.choice([0.125, 0.375, 0.625, 0.875]))
fl = [{"bits": struct.unpack('<Q', struct.pack('<d', f))[0], "repr": json.dumps(f)} for f in floats]

pool = list(range(0, 0x80)) + [0x7f, 0xe9, 0xef, 0x2713, 0xffff, 0xfffe, 0x1f600, 0x10ffff,
                                0x10000, 0xd7ff, 0xe000]
strings = []
for _ in range(300):
    cps = [random.choice(pool) if random.random() < 0.7 else
           random.choice([random.randint(0x80, 0xd7ff), random.randint(0xe000, 0x10ffff)])
           for _ in range(random.randint(0, 20))]
    strings.append({"code_points": cps, "dumps": json.dumps(''.join(chr(c) for c in cps))})


def gen(d):
    r = random.random()
    if d > 3 or r < 0.3:
        return random.choice([None, True, False, random.randint(-2 ** 70, 2 ** 70),
                              random.random() * 10 ** random.randint(-8, 20),
                              "k\u00e9y\n" + chr(0x1f600), float('nan')])
    if r < 0.65:
        return [gen(d + 1) for _ in range(random.randint(0, 4))]
    return {("k%d" % random.randint(0, 99)): gen(d + 1) for _ in range(random.randint(0, 4))}


docs = [json.dumps(gen(0)) for _ in range(100)]
json.dump({"generator": "CPython %s json.dumps with default arguments" % sys.version.split()[0],
           "floats": fl, "strings": strings, "documents": docs}, open('python_json.json', 'w'))
