"""karpy's AWS cloud provider: CreateFleet, launch templates, SSM AMI discovery, SQS interruption.

Registered under the entry-point group ``karpy.providers``; karpy itself never imports it.
"""
