"""The provider's declared loops, which the operator runs beside its own (karpy.cloudprovider's
ProviderExtension): EC2NodeClass status and finalization, interruption, leaked-instance
garbage collection, tagging of registered instances, and periodic upkeep of the caches."""
