"""The patch sums of ``estimate_noise``'s rounds, in float64 (the kernel in
``kernels/noise.py`` computes the same from the image's own dtype)."""
import functools

import torch
import torch.nn.functional as F

PATCH = 7


def patch_stats(x4, limits, stride):
    """For each image of the (B, C, H, W) batch, in its stored units: the sums over its
    kept 7 x 7 patches (every channel, rows and columns ``0, stride, 2 stride, ...``) of
    ``q q'`` with ``q`` the patch's 49 values and a 1 appended: a (B, 50, 50) float64 CPU
    tensor of outer products, sums (last column) and count (last entry). A patch is kept
    when its gradient energy ``p' D p`` (``gradient_form``) is below its image's entry of
    ``limits`` (B,)."""
    B = x4.shape[0]
    p = x4.unfold(2, PATCH, stride).unfold(3, PATCH, stride).to(torch.float64).reshape(B, -1, PATCH * PATCH)
    energy = ((p @ gradient_form().to(p.device)) * p).sum(2)
    keep = (energy < torch.as_tensor(limits, dtype=torch.float64, device=p.device)[:, None]).to(torch.float64)
    q = torch.cat([p, torch.ones_like(p[..., :1])], 2) * keep[..., None]
    return (q.mT @ q).cpu()


@functools.lru_cache(maxsize=None)
def gradient_form():
    """The 49 x 49 float64 matrix D = Dh'Dh + Dv'Dv of the central-difference gradients
    inside a patch: ``p' D p`` is the patch's gradient energy."""
    eye = torch.eye(PATCH * PATCH, dtype=torch.float64).reshape(-1, 1, PATCH, PATCH)
    dh = F.conv2d(eye, torch.tensor([[[[-0.5, 0.0, 0.5]]]], dtype=torch.float64)).reshape(PATCH * PATCH, -1).T
    dv = F.conv2d(eye, torch.tensor([[[[-0.5], [0.0], [0.5]]]], dtype=torch.float64)).reshape(PATCH * PATCH, -1).T
    return dh.T @ dh + dv.T @ dv
