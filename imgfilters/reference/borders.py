"""Border extension as index vectors: the definition behind every reference filter.

``border_indices(n, before, after, mode)`` gives, for each position of the extended axis
``-before .. n + after - 1``, the source index in ``[0, n)``, or -1 where the ``constant``
border supplies the value. Equal to ``numpy.pad`` with modes reflect / symmetric / edge /
constant, including pads wider than the axis (the reflection repeats).
"""
import torch


def border_indices(n: int, before: int, after: int, mode: str) -> torch.Tensor:
    i = torch.arange(-before, n + after, dtype=torch.int64)
    if mode == "reflect":
        period = max(2 * n - 2, 1)
        j = i.abs() % period
        return torch.where(j >= n, period - j, j)
    if mode == "symmetric":
        j = torch.where(i < 0, -1 - i, i) % (2 * n)
        return torch.where(j >= n, 2 * n - 1 - j, j)
    if mode == "replicate":
        return i.clamp(0, n - 1)
    if mode == "constant":
        return torch.where((i >= 0) & (i < n), i, torch.full_like(i, -1))
    raise ValueError(f"unknown border mode {mode!r}")


def pad(x: torch.Tensor, top: int, bottom: int, left: int, right: int, mode: str,
        value: float = 0.0) -> torch.Tensor:
    """Extend the last two dims of ``x`` by the border ``mode`` (differentiable in x)."""
    rows = border_indices(x.shape[-2], top, bottom, mode).to(x.device)
    cols = border_indices(x.shape[-1], left, right, mode).to(x.device)
    out = x.index_select(-2, rows.clamp(min=0)).index_select(-1, cols.clamp(min=0))
    if mode == "constant":
        outside = (rows < 0)[:, None] | (cols < 0)[None, :]
        out = out.masked_fill(outside, value)
    return out


def fold(z: torch.Tensor, n_rows: int, n_cols: int, top: int, left: int, mode: str) -> torch.Tensor:
    """The adjoint of ``pad``: sum each extended position of ``z`` back into the pixel it
    was read from (constant-border positions read no pixel and are dropped)."""
    rows = border_indices(n_rows, top, z.shape[-2] - n_rows - top, mode).to(z.device)
    cols = border_indices(n_cols, left, z.shape[-1] - n_cols - left, mode).to(z.device)
    keep_r, keep_c = rows >= 0, cols >= 0
    z = z[..., keep_r, :][..., keep_c]
    out = z.new_zeros(*z.shape[:-2], n_rows, z.shape[-1]).index_add_(-2, rows[keep_r], z)
    return out.new_zeros(*z.shape[:-2], n_rows, n_cols).index_add_(-1, cols[keep_c], out)
