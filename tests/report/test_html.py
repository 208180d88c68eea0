"""The HTML report renders in headless Chromium with its charts drawn.

Checks: the page is self-contained (no scripts, no external resources); in the DOM that Chromium
builds, the usage chart has stacked bars with positive size and the job chart a step path; the
screenshot (kept in REPORT_TEST_OUTPUT, its path printed) is not blank: it has many distinct
colours and the bars' colour. Skipped (exit 77) when Debian's chromium is not installed.
"""

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

REPORT = os.environ["ELASTIC_REPORT"]
FIXTURE = os.environ["REPORT_FIXTURE"]
OUT = os.environ.get("REPORT_TEST_OUTPUT", "/tmp/report-test-html")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The bar colours of the first three accounts (report/src/html.cpp palette).
BAR_COLOURS = {(0x4e, 0x79, 0xa7), (0xf2, 0x8e, 0x2b), (0xe1, 0x57, 0x59)}


def chromium(*args):
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    try:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def png_pixels(path):
    """Decodes an 8-bit, non-interlaced RGB/RGBA PNG with the standard library: (width, height, rows)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


class HtmlTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
        subprocess.run([FIXTURE, OUT], check=True)
        cls.html = os.path.join(OUT, "report.html")
        p = subprocess.run([REPORT, "--since", "2026-11-20", "--until", "2026-11-21", "--format", "html",
                            "--job", "200", "--db", os.path.join(OUT, "state.db"),
                            "--sacct", os.path.join(OUT, "sacct"), "-o", cls.html],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        with open(cls.html) as f:
            cls.text = f.read()

    def test_page_is_self_contained(self):
        self.assertNotIn("<script", self.text.lower())
        self.assertNotRegex(self.text, r"(?i)\b(src|href)\s*=")
        self.assertNotIn("@import", self.text)
        self.assertNotIn("url(", self.text)
        urls = set(re.findall(r"https?://[^\s\"'<>]+", self.text))
        self.assertEqual(urls, {"http://www.w3.org/2000/svg"})

    def test_charts_are_drawn_in_the_dom(self):
        p = chromium("--dump-dom", "file://" + self.html)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        dom = p.stdout
        with open(os.path.join(OUT, "report.dom.html"), "w") as f:
            f.write(dom)
        usage = re.search(r'<svg id="usage-chart".*?</svg>', dom, re.S)
        job = re.search(r'<svg id="job-chart".*?</svg>', dom, re.S)
        self.assertIsNotNone(usage, "no usage chart in the DOM")
        self.assertIsNotNone(job, "no job chart in the DOM")
        bars = re.findall(r'<rect class="bar" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"',
                          usage.group(0))
        self.assertGreaterEqual(len(bars), 5, "too few bars")  # chem, physics, bio over several hours
        self.assertTrue(all(float(w) > 0 and float(h) > 0 for _, _, w, h in bars))
        fills = set(re.findall(r'<rect class="bar"[^>]*fill="(#[0-9a-f]{6})"', usage.group(0)))
        self.assertEqual(len(fills), 3, fills)  # one colour per account
        step = re.search(r'<path class="step" d="([^"]+)"', job.group(0))
        self.assertIsNotNone(step)
        self.assertGreaterEqual(step.group(1).count("V"), 6)  # 2 -> 6 -> 8 -> 4 -> 2 -> 0
        self.assertIn("peak 8 GPUs", job.group(0))

    def test_screenshot_is_not_blank(self):
        shot = os.path.join(OUT, "report.png")
        p = chromium(f"--screenshot={shot}", "--window-size=1200,900", "file://" + self.html)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        print(f"\nscreenshot: {shot}", file=sys.stderr)
        width, height, bpp, rows = png_pixels(shot)
        self.assertEqual((width, height), (1200, 900))
        colours = {}
        for row in rows:
            for x in range(0, width * bpp, bpp):
                px = tuple(row[x:x + 3])
                colours[px] = colours.get(px, 0) + 1
        self.assertGreater(len(colours), 50, "the screenshot looks blank")
        # chem's and physics' bars are large; bio's is a sliver (its job runs at the end of the day).
        drawn = {c for c in BAR_COLOURS if colours.get(c, 0) > 500}
        self.assertGreaterEqual(len(drawn), 2, f"bar colours on screen: { {c: colours.get(c, 0) for c in BAR_COLOURS} }")


if __name__ == "__main__":
    if not CHROMIUM:
        print("chromium is not installed (Debian package chromium): skipped")
        sys.exit(77)
    unittest.main()
