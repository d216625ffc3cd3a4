"""Host side of each filter family: validate parameters, launch kernels, autograd."""
