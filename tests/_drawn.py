"""What a drawn figure shows, for tests that look at a figure as a reader would, and what a
written PNG says of itself."""
import io
import struct
from pathlib import Path


def cut_off_texts(fig):
    """``plots.style.cut_off_texts`` of ``fig`` drawn as ``python -m mlp_ref figures`` draws it
    (a PNG at the figure's own dpi)."""
    from mlp_ref.plots.style import cut_off_texts as cut_off_after_drawing   # matplotlib

    fig.savefig(io.BytesIO(), format="png")
    return cut_off_after_drawing(fig)


def png_size(path):
    """(width, height) from the IHDR chunk that every PNG starts with."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", path
    return struct.unpack(">II", head[16:24])


def png_software(path):
    """The text of the PNG's "Software" tEXt chunk, or None."""
    data = Path(path).read_bytes()
    pos = 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"tEXt":
            key, _, value = data[pos + 8:pos + 8 + length].partition(b"\0")
            if key == b"Software":
                return value.decode("latin-1")
        pos += 12 + length
    return None
