"""The kernel core shared by every filter family: borders, typed pixels, pointwise steps, tiling."""
