#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora and the reproducers of known defects into corpus/<target>/.
Seeds are small valid inputs; files named regress-* reproduce a defect that was fixed, so the
normal suite replays them.  Usage: tests/fuzz/make_corpus.py"""
import gzip, os, struct, zlib

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def put(target, name, data):
    os.makedirs(os.path.join(here, target), exist_ok=True)
    with open(os.path.join(here, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# ---- idx: first byte bit 0 = labels, bit 1 = apply a limit of (byte >> 2)
labels = struct.pack(">II", 2049, 5) + bytes([3, 1, 4, 1, 5])
images = struct.pack(">IIII", 2051, 2, 28, 28) + bytes(range(256)) * 6 + bytes(32)
put("idx", "labels-raw", b"\x01" + labels)
put("idx", "labels-gzip-limit", b"\x0b" + gzip.compress(labels, mtime=0))
put("idx", "images-raw", b"\x00" + images)
put("idx", "images-gzip", b"\x00" + gzip.compress(images, mtime=0))
put("idx", "regress-truncated-gzip", b"\x00" + gzip.compress(images, mtime=0)[:60])
put("idx", "regress-claims-4g", b"\x00" + struct.pack(">IIII", 2051, 0xFFFFFFFF, 28, 28))

# ---- state: docs/serialization-format.md
def state(tensors):
    head = b"REMATSTD" + struct.pack("<IIQ", 1, 0, len(tensors))
    out = head + struct.pack("<I", zlib.crc32(head))
    for name, code, shape, data in tensors:
        rec = struct.pack("<I", len(name)) + name.encode() + struct.pack("<BBH", code, len(shape), 0)
        rec += b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<Q", len(data)) + data
        out += rec + struct.pack("<I", zlib.crc32(rec))
    return out + b"REMATEND" + struct.pack("<I", zlib.crc32(out))
floats = lambda *v: struct.pack("<%df" % len(v), *v)
put("state", "linear-3-2", state([("bias", 0, [2], floats(0.5, -0.5)),
                                  ("weight", 0, [2, 3], floats(1, 2, 3, 4, 5, 6))]))
put("state", "int64-scalar", state([("step", 2, [], struct.pack("<q", 7))]))
put("state", "regress-zero-dim-huge-strides", state([("weight", 0, [0, 1 << 62], b"")]))

# ---- sim: prototype logs and framework traces, one JSON object per line
start = '{"INSTRUCTION":"ANNOTATE","ANNOTATION":"START"}\n'
const = lambda n, m="64": '{"INSTRUCTION":"CONSTANT","NAME":"%s"}\n{"INSTRUCTION":"MEMORY","NAME":"%s","MEMORY":"%s"}\n' % (n, n, m)
call = lambda a, r, m="64": ('{"INSTRUCTION":"CALL","NAME":"relu","ARGS":["%s"],"RESULT":["%s"],"TIME":"1000"}\n'
                             '{"INSTRUCTION":"MEMORY","NAME":"%s","MEMORY":"%s"}\n{"INSTRUCTION":"ALIAS","NAME":"%s","ALIAS":"-1"}\n') % (a, r, r, m, r)
chain = start + const("x0") + "".join(call("x%d" % i, "x%d" % (i + 1)) for i in range(8))
put("sim", "chain.log", chain + '{"INSTRUCTION":"RELEASE","NAME":"x3"}\n{"INSTRUCTION":"PIN","NAME":"x8"}\n')
put("sim", "mutate-copy.log", start + const("a") + const("b") + call("a", "c") +
    '{"INSTRUCTION":"COPY","SRC":"c","DST":"d"}\n{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["d","b"],"MUTATE":[0],"TIME":"9"}\n'
    '{"INSTRUCTION":"COPY_FROM","SRC":"a","DST":"d"}\n{"INSTRUCTION":"RELEASE","NAME":"c"}\n')
put("sim", "trace.log", '{"INSTRUCTION":"ANNOTATE","ANNOTATION":"START","SOURCE":"remat"}\n' + const("x0") +
    '{"INSTRUCTION":"CALL","NAME":"mul","ARGS":["x0"],"RESULT":["y"],"TIME":"10","SECONDS":1e-8,"FLOPS":16,"BYTES":128,"TIME_COST":1e-8}\n'
    '{"INSTRUCTION":"MEMORY","NAME":"y","MEMORY":"64"}\n{"INSTRUCTION":"ALIAS","NAME":"y","ALIAS":"-1"}\n'
    '{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["y"],"MUTATE":[0],"TIME":"5","OVERWRITE":0}\n'
    '{"INSTRUCTION":"WRITE","NAME":"y"}\n{"INSTRUCTION":"ACCESS","NAME":"x0"}\n')
put("sim", "regress-memory-1e300.log", start + '{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"1e300"}\n')
put("sim", "regress-mutate-minus-one.log", start + const("x") + '{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["x"],"MUTATE":[-1],"TIME":"5"}\n')
put("sim", "regress-mutate-fraction.log", start + const("x") + '{"INSTRUCTION":"MUTATE","NAME":"add_","ARGS":["x"],"MUTATE":[0.7],"TIME":"5"}\n')
put("sim", "regress-source-not-string.log", '{"INSTRUCTION":"ANNOTATE","ANNOTATION":"START","SOURCE":[1]}\n')
put("sim", "regress-sizes-past-2-63.log", start + "".join(const("c%d" % i, str(1 << 62)) for i in range(3)))
def zip_member(claimed, data=b"hello", name=b"a.log"):
    local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0, zlib.crc32(data), claimed, claimed, len(name), 0) + name + data
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 0, 0, 0, zlib.crc32(data), claimed, claimed,
                          len(name), 0, 0, 0, 0, 0, 0) + name
    return local + central + struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 1, 1, len(central), len(local), 0)
put("sim", "logs.zip", zip_member(len(chain.encode()), chain.encode()))
put("sim", "regress-zip-member-claims-4g.zip", zip_member(0xFFFFFF00))

# ---- flags: one argument per line
for name, args in {"defaults": [], "budget-fraction": ["--budget", "0.4", "--heuristic", "lru"],
                   "budget-bytes": ["--budget=300MiB", "--steps", "10", "--threads", "1"],
                   "regress-threads-100000": ["--threads", "100000"],
                   "regress-budget-1e30": ["--budget", "1e30B"],
                   "regress-steps-overflow": ["--steps", "99999999999999999999"],
                   "regress-limit-negative": ["--train-limit", "-3", "--test-limit", "-3"],
                   "regress-range-tiny-step": ["0.1:1.0:1e-300"]}.items():
    put("flags", name, "\n".join(args))
