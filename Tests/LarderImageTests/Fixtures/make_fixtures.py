#!/usr/bin/env python3
"""Regenerates the tiny image fixtures used by LarderImageTests.

Not run by CI: the generated files are committed. Requires Pillow (12+, with WebP, AVIF
and OpenJPEG support), pillow-heif for HEIC, and cjxl (Debian's libjxl-tools) for the real
JPEG XL files:

    pip install pillow pillow-heif
    apt-get install libjxl-tools
    python3 make_fixtures.py

Every still image is 5 x 3 pixels (width != height, so a swapped pair is caught); animated
images have 3 frames. Formats Pillow cannot write (JPEG XL, PDF, SVG, a big-endian TIFF,
a top-down BMP) are built by hand from their specifications.
"""
import io
import os
import struct

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
W, H = 5, 3


def frame(color):
    return Image.new("RGB", (W, H), color)


def rgba(color):
    return Image.new("RGBA", (W, H), color + (128,))


def save(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes")


def pillow(image, fmt, **options):
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


frames = [frame((255, 0, 0)), frame((0, 255, 0)), frame((0, 0, 255))]

save("image.png", pillow(frame((10, 20, 30)), "PNG"))
save("animated.png", pillow(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=100))
save("image.gif", pillow(frame((10, 20, 30)), "GIF"))
save("animated.gif", pillow(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0))
save("image.jpg", pillow(frame((10, 20, 30)), "JPEG", quality=40))
save("progressive.jpg", pillow(frame((10, 20, 30)), "JPEG", quality=40, progressive=True))
save("lossy.webp", pillow(frame((10, 20, 30)), "WEBP", quality=40))
save("lossless.webp", pillow(frame((10, 20, 30)), "WEBP", lossless=True))
save("alpha.webp", pillow(rgba((10, 20, 30)), "WEBP", quality=40))
save("animated.webp", pillow(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, quality=40))
save("image.bmp", pillow(frame((10, 20, 30)), "BMP"))
save("image.tif", pillow(frame((10, 20, 30)), "TIFF"))
save("image.ico", pillow(Image.new("RGB", (16, 16), (10, 20, 30)), "ICO", sizes=[(16, 16)]))
save("image.jp2", pillow(frame((10, 20, 30)), "JPEG2000"))
save("image.j2k", pillow(frame((10, 20, 30)), "JPEG2000", no_jp2=True))
save("image.avif", pillow(frame((10, 20, 30)), "AVIF", quality=40))

try:
    import pillow_heif

    pillow_heif.register_heif_opener()
    save("image.heic", pillow(Image.new("RGB", (W, H), (10, 20, 30)), "HEIF", quality=40))
except ImportError:
    print("pillow-heif not installed: image.heic left as it is")

# A top-down BMP: the same pixels with a negative height and the rows reversed.
bmp = bytearray(pillow(frame((10, 20, 30)), "BMP"))
struct.pack_into("<i", bmp, 22, -H)
save("topdown.bmp", bytes(bmp))


# A big-endian ("MM\0*") baseline TIFF with SHORT ImageWidth and ImageLength, by hand.
def big_endian_tiff():
    pixels = bytes([10, 20, 30]) * (W * H)
    entries = [
        (256, 3, 1, W),  # ImageWidth, SHORT
        (257, 3, 1, H),  # ImageLength, SHORT
        (258, 3, 1, 8),  # BitsPerSample
        (259, 3, 1, 1),  # Compression: none
        (262, 3, 1, 2),  # PhotometricInterpretation: RGB
        (273, 4, 1, 0),  # StripOffsets, patched below
        (277, 3, 1, 3),  # SamplesPerPixel
        (278, 3, 1, H),  # RowsPerStrip
        (279, 4, 1, len(pixels)),  # StripByteCounts
    ]
    ifd_offset = 8
    data_offset = ifd_offset + 2 + 12 * len(entries) + 4
    out = bytearray(b"MM\x00\x2a" + struct.pack(">I", ifd_offset))
    out += struct.pack(">H", len(entries))
    for tag, kind, count, value in entries:
        if tag == 273:
            value = data_offset
        if kind == 3:
            out += struct.pack(">HHIHH", tag, kind, count, value, 0)
        else:
            out += struct.pack(">HHII", tag, kind, count, value)
    out += struct.pack(">I", 0)
    return bytes(out + pixels)


save("bigendian.tif", big_endian_tiff())

# JPEG XL, bare codestream: FF 0A, then zero bits (an all-zero SizeHeader reads as 1 x 1).
# Only the signature matters to the sniffer, which does not decode JPEG XL dimensions.
save("codestream.jxl", bytes([0xFF, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]) + bytes(24))


# JPEG XL in its ISO BMFF container: signature box, ftyp "jxl ", then a jxlc box.
def box(kind, payload):
    return struct.pack(">I", 8 + len(payload)) + kind + payload


jxl_container = (
    bytes([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A])
    + box(b"ftyp", b"jxl " + struct.pack(">I", 0) + b"jxl ")
    + box(b"jxlc", bytes([0xFF, 0x0A]) + bytes(14))
)
save("container.jxl", jxl_container)

save("document.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")

save(
    "image.svg",
    "\ufeff<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!-- A 5 x 3 rectangle -->\n"
    "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"5\" height=\"3\"><rect width=\"5\" height=\"3\"/></svg>\n"
    .encode("utf-8"),
)


# --- Sizes and orientation (real encoders) -----------------------------------------------------

# An ICO with three entries; the 256 x 256 one is stored as PNG with 0 for its size bytes.
save("multi.ico", pillow(Image.new("RGB", (256, 256), (10, 20, 30)), "ICO", sizes=[(16, 16), (48, 32), (256, 256)]))

# A cursor: the same file with type 2 (CUR) in its header.
cur = bytearray(pillow(Image.new("RGB", (32, 32), (10, 20, 30)), "ICO", sizes=[(32, 32)]))
struct.pack_into("<H", cur, 2, 2)
save("image.cur", bytes(cur))

# BigTIFF (version 43, 8-byte offsets), written by Pillow.
save("bigtiff.tif", pillow(frame((10, 20, 30)), "TIFF", big_tiff=True))

# JPEG XL from the reference encoder, as a bare codestream and in its container.
import subprocess
import tempfile

with tempfile.TemporaryDirectory() as folder:
    source = os.path.join(folder, "in.png")
    frame((10, 20, 30)).save(source)
    for name, extra in [("real.jxl", []), ("real-container.jxl", ["--container=1"])]:
        target = os.path.join(folder, name)
        subprocess.run(["cjxl", source, target, "-d", "1", "--quiet"] + extra, check=True)
        with open(target, "rb") as f:
            save(name, f.read())

# JPEG and WebP with an Exif orientation: the stored image is 5 x 3 in every case; 5-8 rotate
# it a quarter turn, so the oriented size is 3 x 5.
for orientation in range(1, 9):
    exif = Image.Exif()
    exif[0x0112] = orientation
    save(f"orientation-{orientation}.jpg", pillow(frame((10, 20, 30)), "JPEG", quality=40, exif=exif.tobytes()))
exif = Image.Exif()
exif[0x0112] = 6
save("orientation-6.webp", pillow(frame((10, 20, 30)), "WEBP", quality=40, exif=exif.tobytes()))
