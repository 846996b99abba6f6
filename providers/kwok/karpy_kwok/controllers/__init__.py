"""The kwok provider's declared loops, which the operator runs beside its own (karpy.cloudprovider's
ProviderExtension): creating the Nodes of launches whose registration delay ran out, and garbage
collection of kwok Nodes no NodeClaim owns. ``extension`` declares them."""
