"""The management cluster as the provider sees it: MachineDeployments as instance types
(`machinedeployments`), the writes that grow and shrink them by exactly karpy's Machines
(`machines`), and ClusterAPINodeClasses with what they select (`nodeclass`)."""
