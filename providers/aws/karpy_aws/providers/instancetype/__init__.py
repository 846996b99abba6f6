"""Instance types: what each offers a node, where and at what price it can be had, what AWS just
refused, and the conversion into the scheduling core's InstanceType values."""
