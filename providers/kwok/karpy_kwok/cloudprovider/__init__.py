"""The CloudProvider itself: KwokCloudProvider, and why a kwok instance drifts.

``provider`` keeps karpy's CloudProvider contract on the simulated instances of
``karpy_kwok.providers``; ``drift`` says why an instance no longer matches its KWOKNodeClass.
"""
