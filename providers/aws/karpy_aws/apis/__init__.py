"""karpenter.k8s.aws/v1: the EC2NodeClass, the AWS provider's NodeClass, as frozen attrs models.

The models live with the provider that owns the kind, not in karpy.apis (which keeps only
karpenter.sh and Kubernetes kinds). karpy finds them, for its CRDs and API reference, through the
``karpy.apis`` entry point (:mod:`karpy_aws.apis.crds`).
"""
