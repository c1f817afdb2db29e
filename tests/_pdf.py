"""What a PDF page shows, read from the file itself (PDF 1.7, ISO 32000-1): the size of every
text run and the resolution of every image, as a reader's viewer places them. Written for the
PDFs matplotlib writes (a classic xref table, Flate streams, strings with escaped parentheses),
and failing loudly on anything else rather than reading it wrong."""
import math
import re
import zlib

_OBJECT = re.compile(rb"(\d+) 0 obj\s*")
#: The tokens of a content stream: a string, a hex string, a name, an array's brackets, a
#: number, an operator (ISO 32000-1, 7.2 and 7.8.2).
_TOKEN = re.compile(rb"\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f\s]*>|/[^\s/\[\]()<>]+|\[|\]"
                    rb"|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'\"*]+")


class Pdf:
    """The objects of a PDF, found through its cross-reference table."""

    def __init__(self, data):
        self.data = data
        start = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
        table = data[start:]
        assert table.startswith(b"xref"), "a classic cross-reference table"
        first, count = map(int, table.split(None, 3)[1:3])
        rows = re.findall(rb"(\d{10}) \d{5} ([nf])", table[:40 + 20 * count])[:count]
        self.offsets = {first + i: int(offset) for i, (offset, kind) in enumerate(rows) if kind == b"n"}

    def dictionary(self, number):
        """The text of object ``number`` up to its stream or its end."""
        at = self.offsets[number]
        match = _OBJECT.match(self.data, at)
        assert match and int(match.group(1)) == number, number
        end = min(i for i in (self.data.find(b"stream", match.end()), self.data.find(b"endobj", match.end()))
                  if i >= 0)
        return self.data[match.end():end]

    def stream(self, number):
        """The decoded bytes of stream object ``number`` (Flate or none)."""
        head = self.dictionary(number)
        length = re.search(rb"/Length (\d+)(?: 0 R)?", head)
        n = int(length.group(1))
        if length.group(0).endswith(b" R"):
            n = int(self.dictionary(n).split()[0])
        begin = self.data.index(b"stream", self.offsets[number]) + len(b"stream")
        begin += 2 if self.data[begin:begin + 2] == b"\r\n" else 1
        raw = self.data[begin:begin + n]
        filters = re.findall(rb"/Filter\s*/(\w+)", head)
        assert filters in ([], [b"FlateDecode"]), filters
        return zlib.decompress(raw) if filters else raw

    def pages(self):
        """The page objects' numbers, in the order of the page tree (matplotlib: one /Kids list)."""
        kids = re.search(rb"/Kids\s*\[([^\]]*)\]", self.data)
        return [int(k) for k in re.findall(rb"(\d+) 0 R", kids.group(1))]

    def media_box(self, page):
        return [float(v) for v in re.search(rb"/MediaBox\s*\[([^\]]*)\]", self.dictionary(page)).group(1).split()]

    def xobjects(self, page):
        """name -> object number of the XObjects the page's resources name."""
        head = self.dictionary(page)
        resources = re.search(rb"/Resources (\d+) 0 R", head)
        if resources:
            head = self.dictionary(int(resources.group(1)))
        ref = re.search(rb"/XObject (\d+) 0 R", head)
        table = self.dictionary(int(ref.group(1))) if ref else re.search(rb"/XObject\s*<<(.*?)>>", head, re.S).group(1)
        return {name.decode(): int(n) for name, n in re.findall(rb"/([^\s/<>]+) (\d+) 0 R", table)}

    def contents(self, page):
        numbers = re.search(rb"/Contents\s*(\[[^\]]*\]|\d+ 0 R)", self.dictionary(page)).group(1)
        return b"\n".join(self.stream(int(n)) for n in re.findall(rb"(\d+) 0 R", numbers))


def _times(m, n):
    """The product m x n of two PDF matrices [a b c d e f] (a point is the row [x y 1])."""
    a, b, c, d, e, f = m
    A, B, C, D, E, F = n
    return [a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F]


def _scale(m):
    """How much the matrix ``m`` scales a length, for a uniform scale with any rotation."""
    return math.sqrt(abs(m[0] * m[3] - m[1] * m[2]))


def page_marks(pdf, page):
    """(texts, images) of one page. texts: (size in points on the page, the shown string's
    bytes) per text-showing operator, the size being the font size set by Tf scaled by the text
    matrix and the current transformation (ISO 32000-1, 9.4.4). images: (pixels per inch
    across, down) per image placed with Do, its pixels over its placed size."""
    xobjects = pdf.xobjects(page)
    kinds = {name: re.search(rb"/Subtype\s*/(\w+)", pdf.dictionary(n)).group(1) for name, n in xobjects.items()}
    ctm, stack, operands = [1, 0, 0, 1, 0, 0], [], []
    tm, size, texts, images = None, None, [], []
    for token in _TOKEN.findall(pdf.contents(page)):
        if token[:1] in b"(<[]/" or re.fullmatch(rb"[-+]?[\d.]+", token):
            operands.append(token)
            continue
        op, args = token, operands
        operands = []
        number = [float(a) for a in args if re.fullmatch(rb"[-+]?[\d.]+", a)]
        if op == b"q":
            stack.append(ctm)
        elif op == b"Q":
            ctm = stack.pop()
        elif op == b"cm":
            ctm = _times(number, ctm)
        elif op == b"BT":
            tm = [1, 0, 0, 1, 0, 0]
        elif op == b"ET":
            tm = None
        elif op == b"Tf":
            size = number[-1]
        elif op == b"Tm":
            tm = number
        elif op in (b"Td", b"TD"):
            tm = _times([1, 0, 0, 1, *number], tm)
        elif op in (b"Tj", b"TJ", b"'", b'"'):
            shown = b"".join(a[1:-1] for a in args if a[:1] == b"(")
            texts.append((size * _scale(_times(tm, ctm)), shown))
        elif op == b"Do":
            name = args[-1][1:].decode()
            kind = kinds[name]
            if kind == b"Image":
                head = pdf.dictionary(xobjects[name])
                w, h = (int(re.search(rb"/%s (\d+)" % key, head).group(1)) for key in (b"Width", b"Height"))
                across, down = math.hypot(ctm[0], ctm[1]) / 72, math.hypot(ctm[2], ctm[3]) / 72
                images.append((w / across, h / down))
            else:              # a marker or a path drawn many times: a shape, never a glyph
                assert kind == b"Form" and re.fullmatch(r"[MP]\d+", name), (name, kind)
    return texts, images
