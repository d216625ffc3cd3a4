"""Float64 definition of a baseline JPEG round trip (encode, then decode): libjpeg's
arithmetic with its integer DCT replaced by the exact one.

Per image of a (B, C, H, W) batch in unit scale, C = 3 (RGB) or 1 (grey), at a quality
1..100, every sample an 8-bit integer wherever a codec stores one:

- the pixels rounded to 8-bit levels (a codec's input), the image extended to whole
  minimum coded units by repeating its last row and column (16 x 16 for colour, 8 x 8 for
  grey), as libjpeg extends them;
- colour: JFIF's YCbCr in libjpeg's 16-bit fixed point (``jccolor.c``), chroma subsampled
  4:2:0 by the mean of each 2 x 2 pixels with libjpeg's alternating rounding bias
  (``h2v2_downsample``);
- each 8 x 8 block, less 128, through the 2-D DCT-II (JPEG's forward DCT, exact), each
  coefficient divided by its quantiser and rounded half away from zero (as libjpeg), then
  multiplied back, the inverse DCT, + 128, rounded and clamped to 0..255;
- chroma upsampled by repeating each sample 2 x 2 (libjpeg without its "fancy" smoothing,
  ``do_fancy_upsampling = FALSE``; BasicSR's DiffJPEG does the same), and RGB again in
  libjpeg's fixed point (``jdcolor.c``), clamped to 0..255.

The quantisers are the standard's example tables (ITU T.81, Annex K) scaled by quality as
libjpeg does (``jpeg_quality_scaling``, baseline: each entry 1..255). Against libjpeg
(PIL) the differences are its integer DCT's rounding (a level here and there) and, for
colour, its smoothing of the chroma on decode; the tests measure both.

The DCT is written as ``D = a(u) a(v) S``, ``S = K^T X K`` with ``K[x, u] = cos((2x + 1)
u pi / 16)`` (so ``K[x, 0] = 1``) and ``a(0) = sqrt(1/8)``, ``a(u) = 1/2``: the DC term
``S[0, 0]`` is the block's integer sum, exact in float32 as in float64, so a DC
coefficient that is exactly half a quantiser off rounds the same way in the kernel.
"""
import math

import torch

__all__ = ["LUMA_TABLE", "CHROMA_TABLE", "integer_qualities", "quantisers", "round_trip"]

LUMA_TABLE = ((16, 11, 10, 16, 24, 40, 51, 61), (12, 12, 14, 19, 26, 58, 60, 55),
              (14, 13, 16, 24, 40, 57, 69, 56), (14, 17, 22, 29, 51, 87, 80, 62),
              (18, 22, 37, 56, 68, 109, 103, 77), (24, 35, 55, 64, 81, 104, 113, 92),
              (49, 64, 78, 87, 103, 121, 120, 101), (72, 92, 95, 98, 112, 100, 103, 99))
CHROMA_TABLE = ((17, 18, 24, 47, 99, 99, 99, 99), (18, 21, 26, 66, 99, 99, 99, 99),
                (24, 26, 56, 99, 99, 99, 99, 99), (47, 66, 99, 99, 99, 99, 99, 99)) + ((99,) * 8,) * 4

# both tables as the kernel takes them (``imgfilters._image.on``): luma then chroma, row by row
TABLES = tuple(float(v) for table in (LUMA_TABLE, CHROMA_TABLE) for row in table for v in row)

# libjpeg's colour conversions: 16-bit fixed-point weights, their offsets with the rounding
# (Y: + 1/2; Cb, Cr: + 128 + 1/2 - 2^-16), and the decoder's (the weights on Cb - 128 and
# Cr - 128, each term + 1/2)
ENCODE = ((19595, 38470, 7471, 32768), (-11059, -21709, 32768, 8421375), (32768, -27439, -5329, 8421375))
DECODE_R_CR, DECODE_G_CB, DECODE_G_CR, DECODE_B_CB = 91881, -22554, -46802, 116130
ONE = 65536


def integer_qualities(quality):
    """Qualities (a tensor) as the codecs take them: int64, rounded half up and clamped to
    1..100 (NaN: 1)."""
    return torch.floor(quality.to(torch.float64).nan_to_num(1.0) + 0.5).clamp(1, 100).to(torch.int64)


def quantisers(table, quality):
    """(B, 8, 8) float64 quantisers of the 8 x 8 ``table`` at each image's ``quality``
    (B,) (``integer_qualities``): libjpeg's scaling, ``5000 // q`` below 50 and
    ``200 - 2 q`` from 50, each entry ``(t * scale + 50) // 100`` clamped to 1..255."""
    q = integer_qualities(quality)
    scale = torch.where(q < 50, 5000 // q, 200 - 2 * q)
    t = torch.tensor(table, dtype=torch.int64, device=q.device)
    return ((t * scale[:, None, None] + 50) // 100).clamp(1, 255).to(torch.float64)


def dct_parts(device=None):
    """The DCT's cosines ``K[x, u]`` and the 8 x 8 products ``a(u) a(v)`` (float64)."""
    k = torch.arange(8, dtype=torch.float64, device=device)
    cos = torch.cos((2 * k[:, None] + 1) * k[None, :] * math.pi / 16)
    a = torch.full((8,), 0.5, dtype=torch.float64, device=device)
    a[0] = math.sqrt(1 / 8)
    return cos, a[:, None] * a[None, :]


def _round_away(v):
    """Round half away from zero (libjpeg's quantisation)."""
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def _near_tie(v, margin):
    """Blocks (the last two dimensions) holding a value within ``margin`` of a rounding
    tie, but not on one: exact ties (a flat block's DC term, its samples) are exact in
    float32 too, and round the same way there."""
    off = (v - v.floor() - 0.5).abs()
    return ((off > 0) & (off < margin)).flatten(-2).any(-1)


def _quantised(plane, q, tie_margin):
    """(B, h, w) 8-bit samples, h and w multiples of 8, through the DCT, quantisers ``q``
    (B, 8, 8) and back, as 8-bit samples; with the blocks (B, h/8, w/8) where a quantised
    coefficient or a decoded sample lies within ``tie_margin`` of a rounding tie, not on
    it (float32 may round those either way)."""
    b, h, w = plane.shape
    cos, aa = dct_parts(plane.device)
    blocks = (plane - 128).reshape(b, h // 8, 8, w // 8, 8).transpose(2, 3)
    ratio = (cos.T @ blocks @ cos) / (q / aa)[:, None, None]
    back = cos @ (_round_away(ratio) * (q * aa)[:, None, None]) @ cos.T + 128
    ties = _near_tie(ratio.abs(), tie_margin) | _near_tie(back, tie_margin)
    samples = torch.floor(back + 0.5).clamp(0, 255)
    return samples.transpose(2, 3).reshape(b, h, w), ties


def _fixed(weights, *planes):
    """libjpeg's fixed-point sum ``(sum w_i p_i + offset) >> 16`` (the offset last)."""
    return torch.floor((sum(w * p for w, p in zip(weights, planes)) + weights[-1]) / ONE)


def _pixels(mask, cell):
    """Per-block flags (B, h, w) as per-pixel ones, each block ``cell`` pixels square."""
    return mask.repeat_interleave(cell, 1).repeat_interleave(cell, 2)


def round_trip(x, quality, tie_margin=None):
    """The JPEG round trip of ``x`` (B, C, H, W), C 3 or 1, unit scale, at the ``quality``
    (B,) of each image (``quantisers``): float64 (B, C, H, W) in unit scale, on 8-bit levels.

    With ``tie_margin``, also a bool (B, 1, H, W) mask of the pixels whose blocks hold a
    coefficient within ``tie_margin`` of a rounding tie (of luma, or of a chroma block
    covering them)."""
    b, c, h, w = x.shape
    mcu = 16 if c == 3 else 8
    v = torch.floor(x.to(torch.float64).clamp(0, 1) * 255 + 0.5)
    rows = torch.arange(-(-h // mcu) * mcu, device=x.device).clamp(max=h - 1)
    cols = torch.arange(-(-w // mcu) * mcu, device=x.device).clamp(max=w - 1)
    v = v[:, :, rows][..., cols]
    H, W = v.shape[-2:]
    luma_q, chroma_q = quantisers(LUMA_TABLE, quality), quantisers(CHROMA_TABLE, quality)
    margin = -1.0 if tie_margin is None else tie_margin
    if c == 1:
        y, ties = _quantised(v[:, 0], luma_q, margin)
        out, ties = y[:, None], _pixels(ties, 8)
    else:
        r, g, bl = v.unbind(1)
        y, luma_ties = _quantised(_fixed(ENCODE[0], r, g, bl), luma_q, margin)
        bias = 1 + torch.arange(W // 2, device=x.device) % 2  # 1, 2, 1, 2, ... along the row
        sub = lambda p: torch.floor((p.reshape(b, H // 2, 2, W // 2, 2).sum((2, 4)) + bias) / 4)
        cb, cb_ties = _quantised(sub(_fixed(ENCODE[1], r, g, bl)), chroma_q, margin)
        cr, cr_ties = _quantised(sub(_fixed(ENCODE[2], r, g, bl)), chroma_q, margin)
        up = lambda p: p.repeat_interleave(2, -2).repeat_interleave(2, -1) - 128
        cb, cr = up(cb), up(cr)
        out = torch.stack([y + _fixed((DECODE_R_CR, ONE // 2), cr),
                           y + _fixed((DECODE_G_CB, DECODE_G_CR, ONE // 2), cb, cr),
                           y + _fixed((DECODE_B_CB, ONE // 2), cb)], 1)
        ties = _pixels(luma_ties, 8) | _pixels(cb_ties | cr_ties, 16)
    out = out.clamp(0, 255)[..., :h, :w] / 255
    return out if tie_margin is None else (out, ties[:, None, :h, :w])
