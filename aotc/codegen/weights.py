"""The weights blob: every constant the generated code reads, 64-byte aligned, once."""
import hashlib

import numpy as np

ALIGN = 64


class WeightsBlob:
    def __init__(self):
        self.chunks = []      # (offset, bytes)
        self.size = 0
        self._by_content = {}

    def add(self, array):
        """Offset of array's bytes in the blob (identical constants share one copy)."""
        array = np.ascontiguousarray(array)
        data = array.tobytes()
        key = (array.dtype.str, hashlib.sha1(data).hexdigest())
        if key not in self._by_content:
            offset = (self.size + ALIGN - 1) // ALIGN * ALIGN
            self.chunks.append((offset, data))
            self.size = offset + max(len(data), 1)
            self._by_content[key] = offset
        return self._by_content[key]

    def write(self, f):
        """The blob as raw bytes, padded to padded_size()."""
        pos = 0
        for offset, data in self.chunks:
            f.write(b"\0" * (offset - pos))
            f.write(data)
            pos = offset + len(data)
        f.write(b"\0" * (self.padded_size() - pos))

    def padded_size(self):
        return max((self.size + ALIGN - 1) // ALIGN * ALIGN, ALIGN)

    def write_c_initializer(self, f, symbol):
        """The blob as a C array initializer, for toolchains without .incbin."""
        f.write(f"static const unsigned char {symbol}[{self.padded_size()}] AOTC_ALIGNED(64) = {{\n")
        buf = bytearray(self.padded_size())
        for offset, data in self.chunks:
            buf[offset:offset + len(data)] = data
        for i in range(0, len(buf), 32):
            f.write(",".join(str(b) for b in buf[i:i + 32]) + ",\n")
        f.write("};\n")
