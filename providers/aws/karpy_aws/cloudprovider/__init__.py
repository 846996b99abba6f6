"""The CloudProvider itself: AWSCloudProvider, and how NodeClaims go in and out of EC2.

``provider`` keeps karpy's CloudProvider contract with the resolvers of ``karpy_aws.providers``;
``launch`` decides what one NodeClaim's CreateFleet asks for; ``nodeclaims`` converts between
NodeClaims and instances; ``drift`` says why an instance no longer matches its EC2NodeClass.
"""
