"""Host side of each filter family: validate parameters, launch kernels, autograd.

Importing this package registers every custom op (``torch.ops.imgfilters.*``): each
family's module registers its ops when it is imported, and all of them are imported here.
"""
from imgfilters.ops import (bilateral, derivatives, filter2d, guided, jpeg, median, morphology, nlm,  # noqa: F401
                            noise, pointwise, resample, separable)
