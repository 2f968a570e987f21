"""weights_digest.py VERSION FILE...: one line per weight file, "SHA256  NAME",
where NAME is the file's base name and SHA256 the digest of its bytes with the
version tfc stamps into `made_by` written as "VERSION" (and the header's length
and padding recomputed), so that the digests survive a version bump but nothing
else: every tensor byte, name, shape and metadata string counts.

tests/weights.sh compares these lines with tests/data/weights.sha256."""
import hashlib
import os
import struct
import sys


def digest(path, version):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = data[8:8 + n].rstrip(b" ")
    stamp = ('\\"version\\":\\"%s\\"' % version).encode()
    header = header.replace(stamp, b'\\"version\\":\\"VERSION\\"')
    return hashlib.sha256(header + b"\0" + data[8 + n:]).hexdigest()


def main():
    version = sys.argv[1]
    for path in sys.argv[2:]:
        print("%s  %s" % (digest(path, version), os.path.basename(path)))


if __name__ == "__main__":
    main()
