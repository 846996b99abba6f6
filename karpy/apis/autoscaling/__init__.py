"""SIG Autoscaling's `autoscaling.x-k8s.io` kinds that karpy serves beside Karpenter's."""
