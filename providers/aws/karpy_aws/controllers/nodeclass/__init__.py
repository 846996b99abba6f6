"""The EC2NodeClass controller (``controller``) and the status it resolves (``status``)."""
