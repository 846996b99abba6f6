"""Controllers that act on NodeClaims: launch, register, initialize and finalize them."""
