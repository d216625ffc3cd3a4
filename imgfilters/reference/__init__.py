"""Float64 CPU definitions of every filter: plain torch written for clarity, the
definition of truth that kernels are tested against and that is itself tested against
the peer library defining the same thing."""
