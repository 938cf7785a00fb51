"""A copy of a GGUF model with another chat template, for tests of what a template changes (a tool-calling
template on the default model, whose own has no tool syntax). Only the metadata is rewritten; the tensor
infos and data are copied as they are (the layout of ggml's docs/gguf.md)."""
import struct
from pathlib import Path

# Byte sizes of GGUF's fixed-size value types; 8 is a string, 9 an array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
TEMPLATE_KEY = "tokenizer.chat_template"


def _u32(data, pos):
    return struct.unpack_from("<I", data, pos)[0]


def _u64(data, pos):
    return struct.unpack_from("<Q", data, pos)[0]


def _string(text):
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _value_end(data, pos, vtype):
    """Where the value of type `vtype` that starts at `pos` ends."""
    if vtype == STRING:
        return pos + 8 + _u64(data, pos)
    if vtype == ARRAY:
        etype, count, pos = _u32(data, pos), _u64(data, pos + 4), pos + 12
        if etype in FIXED:
            return pos + count * FIXED[etype]
        for _ in range(count):
            pos = _value_end(data, pos, etype)
        return pos
    return pos + FIXED[vtype]


def copy_with_chat_template(src, dst, template):
    data = Path(src).read_bytes()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF", f"{src}: not a GGUF file"
    pos, kept, alignment = 24, [], 32
    for _ in range(n_kv):
        start = pos
        key = data[pos + 8:pos + 8 + _u64(data, pos)].decode()
        pos += 8 + _u64(data, pos)
        vtype, value = _u32(data, pos), pos + 4
        pos = _value_end(data, value, vtype)
        if key == "general.alignment":
            alignment = _u32(data, value)
        if key != TEMPLATE_KEY:
            kept.append(data[start:pos])
    infos = pos
    for _ in range(n_tensors):  # name, dims, type, offset
        pos += 8 + _u64(data, pos)
        pos += 4 + 8 * _u32(data, pos) + 4 + 8
    tensor_data = pos + (-pos % alignment)
    header = (struct.pack("<4sIQQ", magic, version, n_tensors, len(kept) + 1) + b"".join(kept) +
              _string(TEMPLATE_KEY) + struct.pack("<I", STRING) + _string(template) + data[infos:pos])
    Path(dst).write_bytes(header + b"\0" * (-len(header) % alignment) + data[tensor_data:])
