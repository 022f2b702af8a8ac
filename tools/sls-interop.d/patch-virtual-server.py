#!/usr/bin/env python3
"""Opt-in frames with noise and photons for slsDetectorPackage's virtual MOENCH server.

Used by tools/sls-interop on the unpacked `slsdet` sdist:
    patch-virtual-server.py <sdist-dir>

The unmodified virtual MOENCH sends one constant frame (pixel value k+1 in packet k). This patch
adds, in virtual builds only, an opt-in generator: when the server's environment has
CLUDA_VIRTUAL_FRAMES naming a file, every acquisition reads that file's first word:
  - "dark":    a pedestal (1000 + (7 row + 3 col) % 100 ADU) plus noise of sigma 10 ADU;
  - "photons": the same, plus 20 single-pixel photons of 800 ADU in every frame, at places
               that follow from the frame number (photon_places() below, and the same formula
               in check-clusters.py);
  - "loss":    "photons" with packets left unsent, so the receiver sees lost packets (see
               cluda_drop below: by frame number f, f % 50 == 7 sends no packet (a missing
               frame), 17 leaves out packet 3, 29 packet 40, 41 packets 25..49 (with two
               interfaces: the second interface's whole part));
  - anything else, or no file: the constant frame, as without the patch.
The noise comes from a fixed-seed xorshift64* generator (Irwin-Hall: 12 uniforms - 6), drawn
once into a bank of 16 frames; frame number f sends bank frame f % 16, so frames are
deterministic and the server keeps its speed (a memcpy per frame) at period 0.

The patch is applied by anchoring on lines of `start_timer` that 9.2.0 and 10.0.1 share; it
fails loudly (exit 1) when an anchor is not found, and does nothing when already applied.
"""
import pathlib
import sys

MARK = "cluda interop"

HELPERS = r'''
#ifdef VIRTUAL
/* cluda interop (tools/sls-interop of cluda), opt-in: see patch-virtual-server.py there. */
#include <stdio.h>
#include <stdlib.h>
#define CLUDA_NBANK (16)
#define CLUDA_NPHOTONS (20)
#define CLUDA_PHOTON_ADU (800)
static int cluda_mode = 0; /* 0 constant frame (unpatched), 1 dark, 2 photons, 3 loss */
static uint16_t *cluda_bank = NULL;

static uint64_t cluda_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static void cluda_frames_prepare(void) {
    cluda_mode = 0;
    const char *path = getenv("CLUDA_VIRTUAL_FRAMES");
    if (path == NULL)
        return;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char word[16] = {0};
    if (fscanf(f, "%15s", word) != 1)
        word[0] = 0;
    fclose(f);
    if (strcmp(word, "dark") == 0)
        cluda_mode = 1;
    else if (strcmp(word, "photons") == 0)
        cluda_mode = 2;
    else if (strcmp(word, "loss") == 0)
        cluda_mode = 3;
    else
        return;
    if (cluda_bank == NULL) {
        const int npixels = NCHAN * NCHIP;
        cluda_bank = malloc((size_t)CLUDA_NBANK * npixels * sizeof(uint16_t));
        if (cluda_bank == NULL) {
            cluda_mode = 0;
            return;
        }
        uint64_t s = 0x9E3779B97F4A7C15ULL;
        for (int b = 0; b < CLUDA_NBANK; ++b) {
            for (int p = 0; p < npixels; ++p) {
                double u = 0;
                for (int k = 0; k < 12; ++k)
                    u += (double)(cluda_next(&s) >> 11) * (1.0 / 9007199254740992.0);
                int row = p / 400, col = p % 400;
                double v = 1000 + (7 * row + 3 * col) % 100 + 10.0 * (u - 6.0);
                cluda_bank[(size_t)b * npixels + p] = (uint16_t)(v + 0.5);
            }
        }
    }
    LOG(logINFOBLUE, ("cluda interop frames: %s\n", word));
}

/* Photon i of frame number f: row 30 + 90 (i / 5) + (7 f) % 31, column 30 + 70 (i % 5) + (13 f) % 29. */
static void cluda_frames_fill(char *image, uint64_t frameNumber) {
    if (cluda_mode == 0)
        return;
    const int npixels = NCHAN * NCHIP;
    memcpy(image, cluda_bank + (size_t)(frameNumber % CLUDA_NBANK) * npixels,
           (size_t)npixels * sizeof(uint16_t));
    if (cluda_mode < 2)
        return;
    uint16_t *pixels = (uint16_t *)image;
    for (int i = 0; i < CLUDA_NPHOTONS; ++i) {
        int row = 30 + 90 * (i / 5) + (int)((7 * frameNumber) % 31);
        int col = 30 + 70 * (i % 5) + (int)((13 * frameNumber) % 29);
        pixels[row * 400 + col] += CLUDA_PHOTON_ADU;
    }
}

/* Whether packet i (0 .. 49 over both interfaces) of frame number f is left unsent. */
static int cluda_drop(uint64_t f, int i) {
    if (cluda_mode != 3)
        return 0;
    switch (f % 50) {
    case 7: return 1;
    case 17: return i == 3;
    case 29: return i == 40;
    case 41: return i >= 25;
    default: return 0;
    }
}
#endif
'''


def insert_after(text, anchor, addition, start=0):
    at = text.find(anchor, start)
    if at < 0:
        sys.exit(f"patch-virtual-server: anchor not found: {anchor!r}")
    at += len(anchor)
    return text[:at] + addition + text[at:], at


def insert_before(text, anchor, addition, start=0):
    at = text.find(anchor, start)
    if at < 0:
        sys.exit(f"patch-virtual-server: anchor not found: {anchor!r}")
    return text[:at] + addition + text[at:], at


def main():
    src = pathlib.Path(sys.argv[1]) / "slsDetectorServers/moenchDetectorServer/slsDetectorFunctionList.c"
    text = src.read_text()
    if MARK in text:
        print(f"patch-virtual-server: {src} already patched")
        return
    text, _ = insert_after(text, "#include <time.h>\n", HELPERS)
    timer = text.find("void *start_timer(void *arg) {")
    if timer < 0:
        sys.exit("patch-virtual-server: start_timer not found")
    # Once per acquisition: read the mode, draw the bank (first time only).
    text, at = insert_before(text, "    // Send data\n", "    cluda_frames_prepare(); /* cluda interop */\n", timer)
    # Once per frame, before its packets are cut from imageData.
    text, _ = insert_before(
        text,
        "            int srcOffset = 0;\n",
        "            cluda_frames_fill(imageData, frameNr + iframes); /* cluda interop */\n",
        at,
    )
    # Per packet, both interfaces: leave out the packets cluda_drop names (mode "loss" only).
    anchor = "if (i >= startval && i <= endval) {"
    if text.count(anchor, at) != 2:
        sys.exit(f"patch-virtual-server: expected 2 of {anchor!r} in start_timer")
    head, tail = text[:at], text[at:]
    text = head + tail.replace(anchor, "if (i >= startval && i <= endval &&\n                        !cluda_drop(frameNr + iframes, i)) { /* cluda interop */")
    src.write_text(text)
    print(f"patch-virtual-server: patched {src}")


if __name__ == "__main__":
    main()
