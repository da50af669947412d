#!/usr/bin/python3
"""Converts a PyTorch state dict to remat's tensor-map file (docs/serialization-format.md).

    torch_to_remat.py IN.pt OUT.remat     convert a torch.save'd state dict (or nn.Module)
    torch_to_remat.py --self-test         round-trip and corruption checks of this module

IN.pt holds a dict name -> tensor saved with torch.save (e.g. model.state_dict()), or a whole
pickled nn.Module, whose .state_dict() is taken.  float32, float64 and int64 tensors are
written as they are; bool, uint8, int8, int16 and int32 tensors are widened to int64 (a note is
printed); any other dtype (float16, bfloat16, complex, ...) is an error naming the tensor.

Other scripts can import write_state(path, tensors) and read_state(path) from here.
"""
import os
import struct
import sys
import tempfile
import zlib

import torch

MAGIC = b"REMATSTD"
END_MAGIC = b"REMATEND"
VERSION = 1
HEADER_SIZE = 28
FOOTER_SIZE = 12
MIN_RECORD_SIZE = 21  # name_len 4 + name 1 + dtype/ndim/reserved 4 + nbytes 8 + crc 4
MAX_NAME = 65535
MAX_DIMS = 32

DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.int64: 2}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
ELEMENT_SIZE = {0: 4, 1: 8, 2: 8}
WIDEN_TO_INT64 = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32)


class FormatError(ValueError):
    """A file that is not a valid remat state file."""


def _crc(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def prepare(tensors, note=print):
    """Returns {name: contiguous little-endian-ready CPU tensor} with dtypes remat accepts.

    Widens bool/small integer tensors to int64 (calling note(message) for each) and raises
    TypeError naming the tensor for any other unsupported dtype or a non-tensor value."""
    out = {}
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"state key {name!r} is not a string")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"'{name}' is a {type(value).__name__}, not a tensor")
        t = value.detach()
        if t.layout != torch.strided:
            raise TypeError(f"'{name}' has layout {t.layout}; only dense tensors can be written")
        if t.is_quantized:
            raise TypeError(f"'{name}' is quantized ({t.dtype}); remat stores float32, "
                            "float64 and int64 only")
        if t.dtype in WIDEN_TO_INT64:
            note(f"note: '{name}' is {t.dtype}; converted to int64")
            t = t.to(torch.int64)
        elif t.dtype not in DTYPE_CODES:
            raise TypeError(f"'{name}' has dtype {t.dtype}; remat stores float32, float64 and "
                            "int64 only (convert it before saving)")
        out[name] = t.cpu().contiguous()
    return out


def encode_record(name, t):
    """The bytes of one record (name_len through record_crc)."""
    name_bytes = name.encode("utf-8")
    if not 1 <= len(name_bytes) <= MAX_NAME:
        raise ValueError(f"name {name!r} must be 1 to {MAX_NAME} bytes of UTF-8")
    if t.dim() > MAX_DIMS:
        raise ValueError(f"'{name}' has {t.dim()} dims; at most {MAX_DIMS} are allowed")
    code = DTYPE_CODES[t.dtype]
    # numpy is optional in Debian's python3-torch; go through a byte view of the storage.
    flat = t.reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    if sys.byteorder != "little":
        raise RuntimeError("writing on a big-endian host is not supported")
    nbytes = flat.numel() * ELEMENT_SIZE[code]
    assert len(data) == nbytes
    body = (struct.pack("<I", len(name_bytes)) + name_bytes + struct.pack("<BBH", code, t.dim(), 0)
            + struct.pack(f"<{t.dim()}q", *t.shape) + struct.pack("<Q", nbytes) + data)
    return body + struct.pack("<I", _crc(body))


def encode_state(tensors, note=print):
    """The bytes of a whole file for {name: tensor}."""
    tensors = prepare(tensors, note)
    names = sorted(tensors, key=lambda n: n.encode("utf-8"))  # byte order, as std::map
    header = MAGIC + struct.pack("<IIQ", VERSION, 0, len(names))
    parts = [header + struct.pack("<I", _crc(header))]
    parts += [encode_record(n, tensors[n]) for n in names]
    body = b"".join(parts)
    return body + END_MAGIC + struct.pack("<I", _crc(body))


def write_state(path, tensors, note=print):
    """Writes {name: tensor} to path atomically: a temporary file in the same directory,
    flushed and fsync'ed, then os.replace'd over path (and the directory fsync'ed)."""
    data = encode_state(tensors, note)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp.{os.getpid()}.",
                               dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode of a new file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # some file systems cannot fsync a directory; the rename itself is done
    return len(data)


class _Reader:
    def __init__(self, path, data):
        self.path, self.data, self.pos = path, data, 0

    def fail(self, message):
        raise FormatError(f"read_state('{self.path}'): {message}")

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            self.fail(f"truncated: needed {n} bytes for {what} at offset {self.pos}, "
                      f"file ends at {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt, what):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def read_state(path):
    """Reads a remat state file and returns {name: tensor} (in file order), checking every
    field the format describes; raises FormatError (a ValueError) on anything wrong."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FormatError(f"read_state('{path}'): not a regular file")
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(path, data)
    magic = r.take(8, "magic")
    if magic != MAGIC:
        r.fail(f"bad magic {magic!r}, expected {MAGIC!r}")
    (version,) = r.unpack("I", "version")
    if version != VERSION:
        r.fail(f"unsupported version {version} (this reader handles {VERSION})")
    (flags,) = r.unpack("I", "flags")
    if flags != 0:
        r.fail(f"non-zero flags {flags:#x}")
    (count,) = r.unpack("Q", "count")
    (header_crc,) = r.unpack("I", "header checksum")
    if header_crc != _crc(data[:24]):
        r.fail(f"header checksum mismatch (stored {header_crc:#010x}, "
               f"computed {_crc(data[:24]):#010x})")
    if count > (len(data) - HEADER_SIZE) // MIN_RECORD_SIZE:
        r.fail(f"count {count} cannot fit in a file of {len(data)} bytes")
    out = {}
    for index in range(count):
        start = r.pos
        (name_len,) = r.unpack("I", f"record {index} name length")
        if not 1 <= name_len <= MAX_NAME:
            r.fail(f"record {index}: name length {name_len} not in 1..{MAX_NAME}")
        try:
            name = r.take(name_len, f"record {index} name").decode("utf-8")
        except UnicodeDecodeError:
            r.fail(f"record {index}: name is not UTF-8")
        code, ndim, reserved = r.unpack("BBH", f"'{name}' dtype/ndim/reserved")
        if code not in CODE_DTYPES:
            r.fail(f"'{name}': unknown dtype code {code}")
        if ndim > MAX_DIMS:
            r.fail(f"'{name}': {ndim} dims, at most {MAX_DIMS} allowed")
        if reserved != 0:
            r.fail(f"'{name}': non-zero reserved bytes {reserved:#x}")
        dims = r.unpack(f"{ndim}q", f"'{name}' dims") if ndim else ()
        numel, stride_span = 1, 1
        for d in dims:
            if d < 0:
                r.fail(f"'{name}': negative dimension {d} in {list(dims)}")
            numel *= d
            stride_span *= max(d, 1)
        if stride_span >= 2 ** 63:
            r.fail(f"'{name}': shape {list(dims)} too large")
        (nbytes,) = r.unpack("Q", f"'{name}' byte length")
        expected = numel * ELEMENT_SIZE[code]
        if nbytes != expected:
            r.fail(f"'{name}': byte length {nbytes} but shape {list(dims)} of "
                   f"{CODE_DTYPES[code]} needs {expected}")
        if nbytes > len(data) - r.pos:
            r.fail(f"'{name}': byte length {nbytes} exceeds the {len(data) - r.pos} bytes left")
        payload = r.take(nbytes, f"'{name}' data")
        (record_crc,) = r.unpack("I", f"'{name}' record checksum")
        if record_crc != _crc(data[start:r.pos - 4]):
            r.fail(f"'{name}': record checksum mismatch")
        if name in out:
            r.fail(f"duplicate name '{name}'")
        dtype = CODE_DTYPES[code]
        t = torch.frombuffer(bytearray(payload), dtype=dtype) if nbytes else \
            torch.empty(0, dtype=dtype)
        out[name] = t.reshape(dims).clone()
    body_end = r.pos
    end_magic = r.take(8, "end marker")
    if end_magic != END_MAGIC:
        r.fail(f"bad end marker {end_magic!r} at offset {body_end}")
    (file_crc,) = r.unpack("I", "file checksum")
    if file_crc != _crc(data[:body_end]):
        r.fail("file checksum mismatch")
    if r.pos != len(data):
        r.fail(f"{len(data) - r.pos} bytes after the footer")
    return out


def load_torch_state(path):
    """A state dict from a torch.save'd file: a dict of tensors or a pickled nn.Module."""
    try:
        obj = torch.load(path, map_location="cpu")
    except Exception as e:  # e.g. a newer torch's weights_only default refusing a module
        if "weights_only" in str(e):
            obj = torch.load(path, map_location="cpu", weights_only=False)
        else:
            raise
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict()
    if isinstance(obj, dict):
        return obj
    raise TypeError(f"{path} holds a {type(obj).__name__}, expected a state dict or nn.Module")


def self_test():
    import shutil

    tmpdir = tempfile.mkdtemp(prefix="torch_to_remat_test.")
    failures = []

    def check(cond, message):
        print(("ok   " if cond else "FAIL ") + message)
        if not cond:
            failures.append(message)

    try:
        g = torch.Generator().manual_seed(0)
        tensors = {
            "scalar.f32": torch.tensor(3.5, dtype=torch.float32),
            "scalar.i64": torch.tensor(-7, dtype=torch.int64),
            "empty": torch.empty(0, 3, dtype=torch.float32),
            "empty.f64": torch.empty(2, 0, dtype=torch.float64),
            "fc.weight": torch.randn(4, 5, generator=g, dtype=torch.float64),
            "fc.bias": torch.randn(4, generator=g),
            "ids": torch.tensor([[0, -1, 2 ** 62], [5, 6, -(2 ** 63)]], dtype=torch.int64),
            "transposed": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
            "Zcaps": torch.tensor([1.0, float("inf"), float("-inf")], dtype=torch.float64),
            "flag": torch.tensor([True, False, True]),
            "int32": torch.tensor([1, 2, 3], dtype=torch.int32),
            "\u00e9l\u00e8ve": torch.ones(2),
        }
        path = os.path.join(tmpdir, "a.remat")
        notes = []
        size = write_state(path, tensors, note=notes.append)
        check(size == os.path.getsize(path), f"wrote {size} bytes")
        check(len(notes) == 2 and all("int64" in n for n in notes),
              f"bool/int32 widened with notes: {notes}")
        back = read_state(path)
        check(list(back) == sorted(tensors, key=lambda n: n.encode()), "names in byte order")
        for name, t in tensors.items():
            b = back[name]
            want = t.to(torch.int64) if t.dtype in WIDEN_TO_INT64 else t
            check(b.dtype == want.dtype and b.shape == want.shape and torch.equal(b, want),
                  f"round trip '{name}' {want.dtype} {list(want.shape)}")
        leftovers = [f for f in os.listdir(tmpdir) if ".tmp." in f]
        check(not leftovers, "no temporary files left")

        # The worked example of docs/serialization-format.md: 69 bytes.
        ex = os.path.join(tmpdir, "ex.remat")
        write_state(ex, {"x": torch.tensor(7, dtype=torch.int64)})
        raw = open(ex, "rb").read()
        check(len(raw) == 69 and raw[28:37] == b"\x01\x00\x00\x00x\x02\x00\x00\x00"
              and raw[37:45] == struct.pack("<Q", 8) and raw[45:53] == struct.pack("<q", 7),
              "documented 69-byte example layout")

        try:
            write_state(os.path.join(tmpdir, "h.remat"), {"half.w": torch.ones(2).half()})
            check(False, "float16 rejected")
        except TypeError as e:
            check("half.w" in str(e), f"float16 rejected: {e}")
        check(not os.path.exists(os.path.join(tmpdir, "h.remat")), "failed write leaves no file")

        # Module pickle through the CLI path.
        module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
        pt = os.path.join(tmpdir, "m.pt")
        torch.save(module, pt)
        sd = load_torch_state(pt)
        write_state(os.path.join(tmpdir, "m.remat"), sd, note=lambda m: None)
        mback = read_state(os.path.join(tmpdir, "m.remat"))
        check(set(mback) == set(module.state_dict()) and
              torch.equal(mback["0.weight"], module[0].weight.detach()) and
              mback["1.num_batches_tracked"].dtype == torch.int64,
              "nn.Module pickle converted via state_dict()")

        def rejects(blob, label, expect):
            bad = os.path.join(tmpdir, "bad.remat")
            with open(bad, "wb") as f:
                f.write(blob)
            try:
                read_state(bad)
                check(False, f"{label} rejected")
            except FormatError as e:
                expects = (expect,) if isinstance(expect, str) else expect
                check(any(x in str(e) for x in expects), f"{label} rejected: {str(e).split(': ', 1)[1]}")

        # Flip each byte of the file in turn: every corruption must be caught.
        small = open(ex, "rb").read()
        caught = 0
        for i in range(len(small)):
            blob = bytearray(small)
            blob[i] ^= 0x01
            try:
                read_state_bytes(bytes(blob), tmpdir)
            except FormatError:
                caught += 1
        check(caught == len(small), f"every single-bit flip detected ({caught}/{len(small)})")

        data = bytearray(open(path, "rb").read())
        rejects(b"XEMATSTD" + bytes(data[8:]), "bad magic", "bad magic")
        v2 = bytearray(data)
        v2[8] = 2
        rejects(bytes(v2), "version 2", "unsupported version")
        fl = bytearray(data)
        fl[12] = 1
        rejects(bytes(fl), "flags", "non-zero flags")
        cnt = bytearray(data)
        cnt[16] ^= 1
        rejects(bytes(cnt), "count byte", "header checksum")
        flip = bytearray(data)
        flip[len(data) - FOOTER_SIZE - 4 - 1] ^= 0x40  # the last data byte of the last record
        rejects(bytes(flip), "flipped data byte", "record checksum")
        rejects(bytes(data[:-1]), "truncated footer", "truncated")
        rejects(bytes(data[:400]), "truncated record", ("truncated", "exceeds"))
        rejects(bytes(data) + b"\x00", "trailing byte", "after the footer")
        endm = bytearray(data)
        endm[-12] ^= 1
        rejects(bytes(endm), "bad end marker", "bad end marker")
        fcrc = bytearray(data)
        fcrc[-1] ^= 1
        rejects(bytes(fcrc), "file checksum", "file checksum")
        # A header whose count is raised, with its checksum fixed up.
        cnt = bytearray(small)
        cnt[16] = 2
        cnt[24:28] = struct.pack("<I", _crc(bytes(cnt[:24])))
        rejects(bytes(cnt), "re-checksummed count", "cannot fit")
        cnt = bytearray(data)  # 12 records: a count of 13 still fits the size check
        cnt[16] = 13
        cnt[24:28] = struct.pack("<I", _crc(bytes(cnt[:24])))
        rejects(bytes(cnt), "re-checksummed count 13", "record 12")
        # Duplicate names with all checksums valid.
        one = encode_record("a", torch.zeros(1))
        header = MAGIC + struct.pack("<IIQ", VERSION, 0, 2)
        body = header + struct.pack("<I", _crc(header)) + one + one
        rejects(body + END_MAGIC + struct.pack("<I", _crc(body)), "duplicate name", "duplicate")
        # A huge nbytes must be rejected before allocating.
        rec = bytearray(small)
        rec[37:45] = struct.pack("<Q", 2 ** 62)
        rec[53:57] = struct.pack("<I", _crc(bytes(rec[28:53])))
        rejects(bytes(rec), "nbytes != shape size", "byte length")
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    print("self-test " + ("passed" if not failures else f"FAILED ({len(failures)} checks)"))
    return 0 if not failures else 1


def read_state_bytes(blob, tmpdir):
    p = os.path.join(tmpdir, "blob.remat")
    with open(p, "wb") as f:
        f.write(blob)
    return read_state(p)


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) != 2 or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src, dst = argv
    try:
        state = load_torch_state(src)
        size = write_state(dst, state)
        check = read_state(dst)
    except (TypeError, ValueError, OSError) as e:
        print(f"torch_to_remat: {e}", file=sys.stderr)
        return 1
    print(f"wrote {dst}: {len(check)} tensors, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
