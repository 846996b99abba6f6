"""AMI families: which images an EC2NodeClass resolves to, and the user data that boots them."""
