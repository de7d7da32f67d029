"""What a memory snapshot file starts with: light (no numpy), for discovery's scan."""

import re

PICKLE_PROTOCOLS = (2, 3, 4, 5)
PROTO_OPCODE = 0x80
# A JSON snapshot is an object whose first key is one of the snapshot dict's own.
_JSON_SNAPSHOT = re.compile(rb'\A\s*\{\s*"(?:segments|device_traces|allocator_settings|external_annotations)"\s*:')


def looks_like_pickle(head: bytes | bytearray | memoryview) -> bool:
    """True when `head` starts like a pickle of a protocol memory snapshots are written in."""
    return len(head) >= 2 and head[0] == PROTO_OPCODE and head[1] in PICKLE_PROTOCOLS


def looks_like_json_snapshot(head: bytes | bytearray | memoryview) -> bool:
    """True when the first bytes of a JSON document are a memory snapshot's."""
    return bool(_JSON_SNAPSHOT.match(bytes(head[:4096])))
