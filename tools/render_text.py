#!/usr/bin/env python3
"""render_text.py - render a line of text into a PP-OCR rec input tensor.

    render_text.py "HELLO 2024" OUT.bin [--width 320] [--height 48] [--scale 4]

Writes OUT.bin (float32 [1, 3, H, W], little-endian, row-major) and
OUT.bin.json (the sidecar `kiln run` reads: name, dims, dtype).  Black text
on white with a classic 5x7 bitmap font, normalised as PP-OCR expects
((pixel / 255 - 0.5) / 0.5, so white = 1, black = -1).  Characters: A-Z, 0-9,
space, '-', '.', ':'.  Python 3 standard library only.  The same font draws
the `text5x7` inputs of the model reference cases (tools/gen_model_refs.py).
"""
import json
import struct
import sys

FONT = {  # 5 columns x 7 rows, '#' = ink
    "A": [".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"],
    "B": ["####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."],
    "C": [".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."],
    "D": ["####.", "#...#", "#...#", "#...#", "#...#", "#...#", "####."],
    "E": ["#####", "#....", "#....", "####.", "#....", "#....", "#####"],
    "F": ["#####", "#....", "#....", "####.", "#....", "#....", "#...."],
    "G": [".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"],
    "H": ["#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"],
    "I": [".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "J": ["..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."],
    "K": ["#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"],
    "L": ["#....", "#....", "#....", "#....", "#....", "#....", "#####"],
    "M": ["#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"],
    "N": ["#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#", "#...#"],
    "O": [".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."],
    "P": ["####.", "#...#", "#...#", "####.", "#....", "#....", "#...."],
    "Q": [".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"],
    "R": ["####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"],
    "S": [".####", "#....", "#....", ".###.", "....#", "....#", "####."],
    "T": ["#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."],
    "U": ["#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."],
    "V": ["#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."],
    "W": ["#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."],
    "X": ["#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"],
    "Y": ["#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."],
    "Z": ["#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"],
    "0": [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
    "1": ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "2": [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    "3": ["#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."],
    "4": ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    "5": ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    "6": ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
    "7": ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    "8": [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    "9": [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
    " ": ["....."] * 7,
    "-": [".....", ".....", ".....", "#####", ".....", ".....", "....."],
    ".": [".....", ".....", ".....", ".....", ".....", ".##..", ".##.."],
    ":": [".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."],
}


def render(text, width, height, scale, x0=16, y0=10, ink=None):
    """Ink map (list of rows of bools) of @p text drawn at (x0, y0), each font
    cell a scale x scale block, 6 cells per character; drawn into @p ink when
    given (several lines on one canvas), else into a new blank canvas."""
    if ink is None:
        ink = [[False] * width for _ in range(height)]
    x = x0
    for ch in text.upper():
        glyph = FONT.get(ch)
        if glyph is None:
            raise SystemExit("render_text.py: no glyph for %r" % ch)
        for r, row in enumerate(glyph):
            for c, cell in enumerate(row):
                if cell != "#":
                    continue
                for dy in range(scale):
                    for dx in range(scale):
                        yy, xx = y0 + r * scale + dy, x + c * scale + dx
                        if 0 <= yy < height and 0 <= xx < width:
                            ink[yy][xx] = True
        x += 6 * scale
    return ink


def main(argv):
    args = {"--width": 320, "--height": 48, "--scale": 4}
    pos = []
    i = 0
    while i < len(argv):
        if argv[i] in args and i + 1 < len(argv):
            args[argv[i]] = int(argv[i + 1])
            i += 2
        else:
            pos.append(argv[i])
            i += 1
    if len(pos) != 2:
        sys.stderr.write(__doc__)
        return 2
    text, out = pos
    w, h = args["--width"], args["--height"]
    ink = render(text, w, h, args["--scale"])
    plane = [(-1.0 if ink[y][x] else 1.0) for y in range(h) for x in range(w)]
    with open(out, "wb") as f:
        for _ in range(3):
            f.write(struct.pack("<%df" % len(plane), *plane))
    with open(out + ".json", "w") as f:
        json.dump({"name": "x", "dims": [1, 3, h, w], "dtype": "float32"}, f)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
